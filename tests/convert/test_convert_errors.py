"""Bad input to conversion: each a one-line ConvertError naming what is wrong, raised before any
weight is allocated (the teacher is never loaded)."""

from __future__ import annotations

import json
import re

import pytest
import torch
from safetensors.torch import load_file, save_file

pytest.importorskip("transformers")

from layerzoo.convert import ConvertError, convert
from layerzoo.convert import conversion as conversion_module

from tests.helpers.hf_teachers import VOCAB, TeacherCase, edit_config, save_teacher, save_tokenizer


@pytest.fixture
def llama(tmp_path):
    return save_teacher(TeacherCase("llama", n_layers=2), tmp_path / "llama")


@pytest.fixture(autouse=True)
def nothing_loaded(monkeypatch):
    def load_teacher(*args):
        raise AssertionError("the teacher's weights were loaded before the error")

    monkeypatch.setattr(conversion_module, "load_teacher", load_teacher)


def refused(folder, pattern="attention", out=None, *words: str) -> str:
    with pytest.raises(ConvertError) as caught:
        convert(folder, pattern, out)
    message = str(caught.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


def test_an_unsupported_architecture_names_the_supported_ones(llama):
    edit_config(llama, model_type="gpt2", architectures=["GPT2LMHeadModel"])
    refused(llama, "attention", None, "'gpt2'", "LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM",
            "Qwen3ForCausalLM")
    edit_config(llama, model_type="llama", architectures=["LlamaForSequenceClassification"])
    refused(llama, "attention", None, "architectures", "LlamaForCausalLM")


def test_a_layerzoo_teacher_with_other_layers_is_refused(tmp_path):
    from layerzoo.hf import LayerzooForCausalLM

    LayerzooForCausalLM.from_spec("swax-tiny").save_pretrained(tmp_path)
    refused(tmp_path, "attention", None, "layer 1", "'mlstm'", "attention or swa")


@pytest.mark.parametrize("changes, key", [
    ({"rope_parameters": {"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0}}, "rope_type 'llama3'"),
    ({"rope_parameters": None, "rope_scaling": {"type": "linear", "factor": 2.0}}, "rope_scaling"),
    ({"attention_bias": True}, "attention_bias"),
    ({"mlp_bias": True}, "mlp_bias"),
    ({"hidden_act": "gelu"}, "hidden_act"),
    ({"layer_types": ["sliding_attention", "sliding"], "sliding_window": 8}, "layer_types"),
    ({"num_attention_heads": 0}, "num_attention_heads"),
    ({"partial_rotary_factor": 0.5}, "partial_rotary_factor"),
])
def test_unsupported_config_features_name_the_key(llama, changes, key):
    edit_config(llama, **changes)
    refused(llama, "attention", None, "config.json", key)


@pytest.mark.parametrize("pattern, words", [
    ("gated_deltanett", ("unknown mixer 'gated_deltanett'", "did you mean 'gated_deltanet'")),
    (["attention", "mlstn"], ("unknown mixer 'mlstn'", "did you mean 'mlstm'")),
    ({"mixers": {"memory": {"type": "assoc_memory"}}, "pattern": ["memory"]}, ("no initialisation from attention",)),
    ({"mixers": {"fast": {"type": "gdn"}}, "pattern": ["fast"]}, ("unknown mixer type 'gdn'",)),
    ("gated_deltanet; attention@2", ("layer 2 is out of range", "2 layers")),
    ("gated_deltanet; attention@-3", ("layer -3 is out of range",)),
    ("gated_deltanet*0", ("COUNT a positive integer",)),
    ("gated_deltanet; attention@first", ("'first'", "not a layer index")),
    ({"mixers": {"gated_deltanet": {"n_heads": 2}}, "pattern": "gated_deltanet"}, ("gated_deltanet.n_heads is 2", "needs 4")),
    ({"mixers": {"swa": {"window": 0}}, "pattern": "swa"}, ("layer 0", "window")),
    ({"mixers": {"swa": {"windw": 8}}, "pattern": "swa"}, ("did you mean 'window'",)),
    ({"mixers": {"swa": {"window": 8}}, "pattern": "gated_deltanet"},
     ("mixers.swa: options given, but no layer becomes 'swa'", "the layers become gated_deltanet")),
    ({"pattern": "swa", "d_model": 32}, ("d_model is 32", "teacher's is 64")),
    ({"pattern": "swa", "ffn": False}, ("ffn", "the teacher's")),
    ({"layers": ["swa"]}, ("one mixer name for each of the teacher's 2 layers",)),
    ({"pattern": "swa", "layers": ["swa", "swa"]}, ("exactly one of",)),
    (42, ("a rule string",)),
])
def test_bad_patterns(llama, pattern, words):
    refused(llama, pattern, None, *words)


def test_a_yaml_spec_file_is_read_as_its_model_section(llama, tmp_path):
    spec = tmp_path / "hybrid.yaml"
    spec.write_text("model:\n  mixers:\n    fast: {type: gated_deltanett}\n  pattern: [fast, attention]\n")
    refused(llama, spec, None, "mixers.fast", "did you mean 'gated_deltanet'")


def test_a_tokenizer_larger_than_the_vocabulary_is_refused(llama):
    save_tokenizer(llama, VOCAB + 5)
    refused(llama, "attention", None, "tokenizer.json", str(VOCAB + 4), f"vocab_size is {VOCAB}")


@pytest.mark.parametrize("file", ["config.json", "tokenizer_config.json"])
def test_a_folder_with_custom_code_is_refused(llama, file):
    path = llama / file
    data = json.loads(path.read_text())
    path.write_text(json.dumps(data | {"auto_map": {"AutoModelForCausalLM": "modeling_evil.EvilForCausalLM"}}))
    refused(llama, "attention", None, file, "auto_map", "never runs")


def test_missing_and_misshapen_weights_are_named(llama):
    weights = load_file(llama / "model.safetensors")
    name = "model.layers.1.mlp.up_proj.weight"
    save_file({k: v for k, v in weights.items() if k != name}, llama / "model.safetensors", metadata={"format": "pt"})
    refused(llama, "attention", None, name, "missing")
    save_file(weights | {name: torch.zeros(3, 64)}, llama / "model.safetensors", metadata={"format": "pt"})
    refused(llama, "attention", None, name, "(3, 64)", "(96, 64)")
    (llama / "model.safetensors").write_bytes(b"not safetensors")
    refused(llama, "attention", None, "not a readable safetensors file")
    (llama / "model.safetensors").unlink()
    refused(llama, "attention", None, "no model.safetensors")


def test_folders_that_are_not_teachers(tmp_path):
    refused(tmp_path / "absent", "attention", None, "no such folder")
    refused(tmp_path, "attention", None, "no config.json")


def test_an_output_folder_that_is_not_empty_is_refused(llama, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    refused(llama, "gated_deltanet", out, str(out), "not an empty folder")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]


def test_a_teacher_larger_than_the_memory_is_one_line_saying_how_much_before_loading(llama, monkeypatch, tmp_path):
    monkeypatch.setattr(conversion_module, "available_memory", lambda: 2**14)
    message = refused(llama, "attention", tmp_path / "out")
    needed = re.fullmatch(rf"{llama}: its weights need (\d+\.\d) KiB of memory as read and as the teacher and the "
                          r"student in float32, 16\.0 KiB is available", message)
    assert needed and float(needed.group(1)) > 16, message
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(conversion_module, "available_memory", lambda: 2**10)
    with pytest.raises(ConvertError, match=r"as the teacher in float32, 1\.0 KiB is available$"):
        conversion_module.read_teacher_folder(llama)  # what eval and a conversion's reloading read
