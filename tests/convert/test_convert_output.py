"""A conversion saved: a layerzoo Hugging Face folder (AutoModelForCausalLM loads it and generates
with its constant-size state), the teacher's tokenizer, conversion.json; Conversion.load reads it
back; `layerzoo convert` writes the same."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM, AutoTokenizer

import layerzoo
import layerzoo.hf  # noqa: F401 - registers the layerzoo model type with the Auto classes
from layerzoo.cli import main
from layerzoo.convert import Conversion, ConvertError, convert
from layerzoo.hf import LayerzooCache
from layerzoo.testing import assert_close

from tests.helpers.hf_teachers import VOCAB, TeacherCase, save_teacher

HYBRID = "gated_deltanet*3,attention"  # Gated DeltaNet : attention 3:1


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    teacher = save_teacher(TeacherCase("llama", n_layers=4, tied=True), tmp_path_factory.mktemp("teacher"))
    out = tmp_path_factory.mktemp("converted") / "hybrid"
    return teacher, out, convert(teacher, HYBRID, out)


def test_the_folder_loads_with_auto_model_and_generates_with_its_state(saved):
    _, out, conversion = saved
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    ids = torch.randint(1, VOCAB, (2, 6), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert_close(model(ids).logits, conversion.student(ids))
        generated = model.generate(ids, max_new_tokens=5, do_sample=False, return_dict_in_generate=True)
        tokens = generated.sequences
        assert tokens.shape == (2, 11)
        cache = generated.cache if hasattr(generated, "cache") else generated.past_key_values
        assert isinstance(cache, LayerzooCache)
        greedy = ids  # the same tokens by recomputing the whole sequence at each step, without a state
        for _ in range(5):
            greedy = torch.cat((greedy, conversion.student(greedy)[:, -1:].argmax(-1)), dim=1)
    assert torch.equal(tokens, greedy)
    assert [type(block.mixer).__name__ for block in model.model.blocks] == ["GatedDeltaNet"] * 3 + ["Attention"]


def test_the_teachers_tokenizer_is_copied(saved):
    teacher, out, _ = saved
    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (out / name).read_bytes() == (teacher / name).read_bytes()
    assert AutoTokenizer.from_pretrained(out)("w3 w5")["input_ids"] == [3, 5]


def test_conversion_json_records_the_teacher_and_each_layer(saved):
    teacher, out, _ = saved
    record = json.loads((out / "conversion.json").read_text())
    assert record == {
        "teacher": str(teacher), "converted_layers": [0, 1, 2],
        "layers": [{"index": i, "from": "attention", "to": "gated_deltanet", "init": "from_attention"} for i in range(3)]
        + [{"index": 3, "from": "attention", "to": "attention", "init": "copied"}],
        "layerzoo_version": layerzoo.__version__}


def test_conversion_load_gives_back_student_and_teacher(saved):
    teacher, out, conversion = saved
    loaded = Conversion.load(out)
    assert loaded.converted == (0, 1, 2) and loaded.source == teacher
    ids = torch.randint(0, VOCAB, (1, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        assert torch.equal(loaded.student(ids), conversion.student(ids))
        assert torch.equal(loaded.teacher(ids), conversion.teacher(ids))


@pytest.mark.parametrize("case, words", [
    ("missing", ["no such folder"]),
    ("not-a-conversion", ["not a conversion folder (no conversion.json", "`layerzoo convert` writes one"]),
    ("no-teacher", ["conversion.json: names no teacher folder"]),
    ("bad-layers", ["conversion.json: converted_layers must be a list of layer indices"]),
    ("teacher-gone", ["conversion.json: the teacher's folder", "gone", "is missing"]),
])
def test_conversion_load_of_a_bad_folder_is_one_line(saved, tmp_path, case, words):
    teacher, out, _ = saved
    folder = tmp_path / "converted"
    if case == "not-a-conversion":
        folder = teacher
    elif case != "missing":
        shutil.copytree(out, folder)
        record = json.loads((folder / "conversion.json").read_text())
        record |= {"no-teacher": {"teacher": None}, "bad-layers": {"converted_layers": "0,1,2"},
                   "teacher-gone": {"teacher": str(tmp_path / "gone")}}[case]
        (folder / "conversion.json").write_text(json.dumps(record))
    with pytest.raises(ConvertError) as caught:
        Conversion.load(folder)
    message = str(caught.value)
    assert "\n" not in message and all(word in message for word in words), message


def test_the_command_writes_the_folder_and_errors_are_one_line(saved, tmp_path, capsys):
    teacher, out, conversion = saved
    target = tmp_path / "cli"
    assert main(["convert", str(teacher), "--pattern", HYBRID, "--out", str(target)]) == 0
    assert "converted layers 0, 1, 2 of 4" in capsys.readouterr().out
    assert (target / "model.safetensors").read_bytes() == (out / "model.safetensors").read_bytes()
    assert main(["convert", str(teacher), "--pattern", "swa", "--set", "swa.window=3", "--out", str(tmp_path / "swa")]) == 0
    assert json.loads((tmp_path / "swa" / "config.json").read_text())["sliding_window"] == 3
    capsys.readouterr()
    assert main(["convert", str(teacher), "--pattern", "swa", "--out", str(target)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "not an empty folder" in error


def test_the_command_names_the_teacher_as_given_writes_every_file_0644_and_prints_no_bars(saved, tmp_path, monkeypatch,
                                                                                         capsys):
    teacher, _, _ = saved
    monkeypatch.chdir(teacher.parent)
    monkeypatch.setattr("os.umask", lambda mask=0o022: 0o022)  # the usual umask, whatever the test machine's
    assert main(["convert", teacher.name, "--pattern", HYBRID, "--out", str(tmp_path / "cli")]) == 0
    assert json.loads((tmp_path / "cli" / "conversion.json").read_text())["teacher"] == teacher.name
    assert {path.name: oct(path.stat().st_mode & 0o777) for path in (tmp_path / "cli").iterdir()} == {
        path.name: "0o644" for path in (tmp_path / "cli").iterdir()}
    assert "Writing model shards" not in capsys.readouterr().err
    assert Conversion.load(tmp_path / "cli").source.name == teacher.name


def test_the_commands_help_documents_the_patterns(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    text = capsys.readouterr().out
    for fragment in ("gated_deltanet*3,attention", "attention@0,-1", "--set", "hybrid.yaml"):
        assert fragment in text
