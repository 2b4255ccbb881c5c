import textwrap

import pytest
import yaml
from hypothesis import given

import layerzoo
from layerzoo import SpecError, load_spec
from layerzoo.testing import mixer_specs

from tests.helpers.spec_errors import assert_spec_error

BASE = """\
name: base
model:
  d_model: 32
  n_layers: 4
  vocab_size: 64
  mixers:
    swa: {n_heads: 4, window: 8}
    attention: {n_heads: 4}
  pattern: [swa, swa, swa, attention]
"""


def write(tmp_path, text, name="spec.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_pattern_is_cycled_to_n_layers(tmp_path):
    spec = load_spec(write(tmp_path, BASE), ["model.n_layers=6"])
    assert [layer.name for layer in spec.model.layers] == ["swa", "swa", "swa", "attention", "swa", "swa"]
    assert spec.model.layers[0].options["window"] == 8
    assert spec.model.layers[0].options["rope_theta"] == 10000.0  # defaults filled in


def test_layers_listed_one_by_one(tmp_path):
    spec = load_spec(write(tmp_path, BASE.replace("pattern: [swa, swa, swa, attention]", "layers: [attention, swa, swa, swa]")))
    assert [layer.type for layer in spec.model.layers] == ["attention", "swa", "swa", "swa"]


def test_extends_deep_merges_and_overrides(tmp_path):
    write(tmp_path, BASE, "base.yaml")
    child = write(tmp_path, """\
        extends: base.yaml
        model:
          mixers:
            swa: {window: 16}
          ffn: false
          overrides:
            0: {window: 4}
            -1: {ffn: {hidden: 40}, qk_norm: true}
            1: {mixer: attention}
        """)
    spec = load_spec(child)
    layers = spec.model.layers
    assert layers[0].options["window"] == 4 and layers[0].options["n_heads"] == 4
    assert layers[2].options["window"] == 16
    assert layers[1].type == "attention"
    assert layers[3].ffn_hidden == 40 and layers[3].options["qk_norm"] is True
    assert [layer.ffn_hidden for layer in layers[:3]] == [None, None, None]


def test_extends_a_shipped_spec():
    spec = load_spec({"extends": "swa-tiny", "model": {"n_layers": 2}})
    assert spec.model.n_layers == 2 and spec.model.layers[0].options["window"] == 16


def test_command_line_overrides_parse_yaml_values(tmp_path):
    spec = load_spec(write(tmp_path, BASE), ["model.d_model=64", "model.pattern=[swa]", "model.mixers.swa.window=3"])
    assert spec.model.d_model == 64 and {layer.type for layer in spec.model.layers} == {"swa"}
    assert spec.model.mixers["swa"].options["window"] == 3


@pytest.mark.parametrize("name", layerzoo.shipped_specs())
def test_dump_round_trips_every_shipped_spec(name, tmp_path):
    spec = load_spec(name)
    spec.save(tmp_path / "dump.yaml")
    again = load_spec(tmp_path / "dump.yaml")
    assert again.model == spec.model
    assert yaml.safe_load(again.to_yaml()) == yaml.safe_load(spec.to_yaml())


@given(raw=mixer_specs())
def test_dump_round_trips_generated_specs(raw):
    spec = load_spec(raw)
    assert load_spec(yaml.safe_load(spec.to_yaml())).model == spec.model


def test_dump_keeps_per_layer_overrides(tmp_path):
    spec = load_spec(write(tmp_path, BASE + "  overrides:\n    2: {window: 2, ffn: false}\n"))
    again = load_spec(spec.to_dict())
    assert again.model == spec.model and again.model.layers[2].ffn_hidden is None


def test_built_model_dumps_its_spec(tmp_path):
    model = layerzoo.build("swa-full-tiny")
    model.save_spec(tmp_path / "resolved.yaml")
    assert layerzoo.build(tmp_path / "resolved.yaml").config == model.config


MALFORMED = [
    # (replace this, with this, expected line, words in the message)
    ("mixers:\n    swa: {n_heads: 4, window: 8}", "mixers:\n    swa: {type: swaa, n_heads: 4}", 7, ["model.mixers.swa.type", "unknown mixer 'swaa'", "did you mean 'swa'"]),
    ("window: 8", "windw: 8", 7, ["model.mixers.swa.windw", "unknown option", "did you mean 'window'"]),
    ("window: 8", "window: eight", 7, ["model.mixers.swa.window", "expected int"]),
    ("window: 8", "window: 0", 7, ["model.mixers.swa.window", ">= 1"]),
    ("swa: {n_heads: 4", "swa: {n_heads: 5", 7, ["model.mixers.swa.n_heads", "not divisible"]),
    ("attention: {n_heads: 4}", "attention: {n_heads: 4, backend: flesh}", 8,
     ["model.mixers.attention.backend", "unknown value 'flesh'; did you mean 'flex'"]),
    ("pattern: [swa, swa, swa, attention]", "pattern: [swa, mlp]", 9, ["model.pattern.1", "'mlp' is not declared"]),
    ("d_model: 32", "d_modle: 32", 3, ["model.d_modle", "did you mean 'd_model'"]),
    ("d_model: 32", "d_model: 32.5", 3, ["model.d_model", "expected int"]),
    ("n_layers: 4", "n_layers: -1", 4, ["model.n_layers", "between 1 and 4096"]),
    ("n_layers: 4", "n_layers: 1000000000", 4, ["model.n_layers", "between 1 and 4096"]),
    ("d_model: 32", "d_model: 4611686018427387904", 3, ["model.d_model", "between 1 and 1048576"]),
    ("vocab_size: 64", "vocab_size: 64\n  norm: {eps: -1}", 6, ["model.norm.eps", "must be > 0.0"]),
    ("vocab_size: 64", "vocab_size: 64\n  init_std: -1", 6, ["model.init_std", "must be > 0.0"]),
    ("attention: {n_heads: 4}", "attention: {n_heads: 4, rope_theta: .nan}", 8,
     ["model.mixers.attention.rope_theta", "must be a finite number"]),
    ("  vocab_size: 64\n", "", 2, ["model", "missing required key 'vocab_size'"]),
    ("pattern: [swa, swa, swa, attention]", "pattern: [swa]\n  layers: [swa]", 2, ["exactly one of 'pattern'"]),
    ("pattern: [swa, swa, swa, attention]", "layers: [swa, attention]", 9, ["model.layers", "lists 2 layers but n_layers is 4"]),
    ("name: base", "name: base\nnmae: typo", 2, ["nmae", "did you mean 'name'"]),
    ("vocab_size: 64", "vocab_size: 64\n  overrides:\n    7: {window: 2}", 7, ["model.overrides.7", "not a layer index"]),
    ("vocab_size: 64", "vocab_size: 64\n  vocab_size: 65", 6, ["duplicate key"]),
    ("mixers:", "mixers: [", 6, ["invalid YAML", "'[' left open"]),
]


@pytest.mark.parametrize("old, new, line, words", MALFORMED, ids=[case[3][-1] for case in MALFORMED])
def test_malformed_specs_name_file_line_and_key(tmp_path, old, new, line, words):
    assert old in BASE
    path = write(tmp_path, BASE.replace(old, new, 1))
    with pytest.raises(SpecError) as error:
        load_spec(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:"), message
    assert "\n" not in message
    for word in words:
        assert word in message, message


def test_an_extends_cycle_is_reported(tmp_path):
    write(tmp_path, "extends: b.yaml\n", "a.yaml")
    write(tmp_path, "extends: a.yaml\n", "b.yaml")
    with pytest.raises(SpecError, match="extends cycle"):
        load_spec(tmp_path / "a.yaml")


def test_unknown_shipped_spec_suggests_a_close_one():
    with pytest.raises(SpecError, match="did you mean 'swa-full'"):
        load_spec("swa-ful")


def test_errors_in_an_extended_file_point_at_that_file(tmp_path):
    write(tmp_path, BASE.replace("window: 8", "windw: 8"), "base.yaml")
    child = write(tmp_path, "extends: base.yaml\nmodel: {n_layers: 2}\n")
    with pytest.raises(SpecError, match=r"base\.yaml:7: model\.mixers\.swa\.windw"):
        load_spec(child)


def test_bad_command_line_override_names_the_flag(tmp_path):
    with pytest.raises(SpecError, match=r"spec.yaml:\d+: model.mixers.\w+.n_heads: d_model 33 is not divisible"):
        load_spec(write(tmp_path, BASE), ["model.d_model=33"])
    with pytest.raises(SpecError, match="expected KEY=VALUE"):
        load_spec(write(tmp_path, BASE), ["model.d_model"])
    with pytest.raises(SpecError, match=r"^--set model.mixers.swa.window=0: model.mixers.swa.window: must be >= 1"):
        load_spec(write(tmp_path, BASE), ["model.mixers.swa.window=0"])


def test_aliases_cost_what_their_text_does(tmp_path):
    """A YAML alias bomb: each level lists the one before nine times (9**5 leaves once expanded).
    Locations are recorded once per written node, so reading it stays as small as its text."""
    from layerzoo.specs.yaml_source import read_yaml

    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 5)]
    data, locations = read_yaml("\n".join(lines), "bomb.yaml")
    assert len(data["a4"]) == 9 and len(locations) < 100
    path = write(tmp_path, "\n".join(lines) + "\n")
    with pytest.raises(SpecError, match=rf"^{path}:1: a0: unknown key"):
        load_spec(path)


def test_a_key_that_is_not_a_name_is_one_line(tmp_path):
    path = write(tmp_path, "model:\n  ? [a, b]\n  : 1\n")
    with pytest.raises(SpecError, match=rf"^{path}:2: invalid YAML: found unhashable key$"):
        load_spec(path)


def test_unreadable_or_runaway_spec_files_are_one_line(tmp_path):
    latin = tmp_path / "latin.yaml"
    latin.write_bytes("name: caf\xe9\n".encode("latin-1"))
    with pytest.raises(SpecError, match=rf"^{latin}: not UTF-8 text \(byte 9 is 0xe9\)$"):
        load_spec(latin)
    write(tmp_path, BASE, "s0.yaml")
    for index in range(1, 70):
        write(tmp_path, f"extends: s{index - 1}.yaml\n", f"s{index}.yaml")
    assert load_spec(tmp_path / "s60.yaml").model.n_layers == 4
    with pytest.raises(SpecError, match=r"s69.yaml: its extends chain is more than 64 files deep"):
        load_spec(tmp_path / "s69.yaml")
    with pytest.raises(SpecError, match=r"^--set extends=swa-tiny: extends cannot be set from the command line"):
        load_spec(tmp_path / "s0.yaml", ["extends=swa-tiny"])


def test_layers_over_an_inherited_pattern_names_the_users_file_and_how_to_clear_it(tmp_path):
    write(tmp_path, BASE, "base.yaml")
    child = write(tmp_path, "extends: base.yaml\nmodel:\n  layers: [swa, attention]\n  n_layers: 2\n")
    with pytest.raises(SpecError) as error:
        load_spec(child)
    message = str(error.value)
    assert message.startswith(f"{child}:3: model.layers: ") and "\n" not in message
    assert f"'pattern' is inherited from {tmp_path / 'base.yaml'}:9" in message and "`pattern: null`" in message
    cleared = write(tmp_path, "extends: base.yaml\nmodel:\n  layers: [swa, attention]\n  n_layers: 2\n  pattern: null\n")
    assert [layer.type for layer in load_spec(cleared).model.layers] == ["swa", "attention"]
    with pytest.raises(SpecError, match=r"^--set model.layers=\[swa\]: model.layers: 'pattern' is inherited from .*"
                                        r"clear it with --set model.pattern=null"):
        load_spec(tmp_path / "base.yaml", ["model.layers=[swa]", "model.n_layers=1"])
    assert load_spec(tmp_path / "base.yaml", ["model.layers=[swa]", "model.n_layers=1", "model.pattern=null"])


def test_n_layers_over_inherited_layers_names_the_users_file(tmp_path):
    write(tmp_path, BASE.replace("pattern: [swa, swa, swa, attention]", "layers: [swa, swa, swa, attention]"), "base.yaml")
    child = write(tmp_path, "extends: base.yaml\nmodel:\n  n_layers: 2\n")
    with pytest.raises(SpecError, match=rf"^{child}:3: model.n_layers: is 2 but the layers inherited from "
                                        rf"{tmp_path / 'base.yaml'}:9 list 4"):
        load_spec(child)


YAML_MISTAKES = [
    # (the spec's lines with one mistake, the line of the mistake, words in the message)
    (["model:", "  d_model 32", "  n_layers: 4"], 2, ["a key without ':'"]),
    (["model:", "  d_model: 32", "   n_layers: 4", "  vocab_size: 64"], 3, ["indentation"]),
    (["model:", "   d_model: 32", "  n_layers: 4", "  vocab_size: 64"], 2, ["indentation"]),
    (["model:", "  d_model: 32", "n_layers: 4", "  vocab_size: 64", "  mixers: {}"], 3, ["indentation"]),
    (["model:", "  d_model: 32", "  n_layers: 4", "   vocab_size: 64"], 4, ["indentation"]),
    (["model:", "  mixers: {swa: {window: 8}", "  d_model: 32"], 2, ["'{' left open"]),
    (["model:", "  mixers: [swa, attention", "  d_model: 32"], 2, ["'[' left open"]),
    (["name: \"base", "model:", "  d_model: 32"], 1, ["quoted scalar left open"]),
    (["model:", "\td_model: 32"], 2, ["cannot start any token"]),
]


@pytest.mark.parametrize("lines, line, words", YAML_MISTAKES, ids=[str(case[1]) + case[2][0] for case in YAML_MISTAKES])
def test_a_yaml_syntax_error_names_the_line_of_the_mistake(tmp_path, lines, line, words):
    """YAML's parser reports many mistakes at the line after them (the one where it gives up): a
    key that lacks its ':', a line indented unlike its siblings, a bracket or quote left open."""
    assert_spec_error(write(tmp_path, "\n".join(lines) + "\n"), line, words, after=" invalid YAML: ")
