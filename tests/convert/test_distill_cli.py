"""`layerzoo distill` end to end on a folder `layerzoo convert` wrote: the run folder, the reliance
table, the student as a transformers folder with the teacher's tokenizer; and each bad input as one line."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch

from layerzoo.cli import main

transformers = pytest.importorskip("transformers")


def test_distill_writes_a_run_and_a_student_that_transformers_loads(folders, tmp_path, capsys, monkeypatch):
    out = tmp_path / "run"
    monkeypatch.setattr("os.umask", lambda mask=0o022: 0o022)  # the usual umask, whatever the test machine's
    assert main(["distill", str(folders.converted), "--out", str(out), "--config", str(folders.config)]) == 0
    printed = capsys.readouterr()
    assert "none (intact)" in printed.out and "gated_deltanet" in printed.out and "distilled on 256 tokens" in printed.out
    assert "reliance: 100%" in printed.err  # the reliance measure's bar
    assert {oct(path.stat().st_mode & 0o777) for path in (out / "model").iterdir()} == {"0o644"}
    for name in ("spec.yaml", "loss-align.png", "loss-end_to_end.png", "reliance.json", "distill-report.json",
                 "align/metrics.jsonl", "end_to_end/checkpoints", "tokenizer/tokenizer.json"):
        assert (out / name).exists(), name
    report = json.loads((out / "distill-report.json").read_text())
    assert report["converted_layers"] == [1] and report["tokens"]["total"] == 256
    assert report["teacher"] == json.loads((folders.converted / "conversion.json").read_text())["teacher"]
    import layerzoo.hf  # noqa: F401 (registers the Auto classes)

    model = transformers.AutoModelForCausalLM.from_pretrained(out / "model")
    tokenizer = transformers.AutoTokenizer.from_pretrained(out / "model")
    teacher_tokenizer = transformers.AutoTokenizer.from_pretrained(folders.teacher)
    assert tokenizer("def class return").input_ids == teacher_tokenizer("def class return").input_ids
    ids = torch.tensor([tokenizer("def class return self value").input_ids])
    with torch.no_grad():
        logits = model(ids).logits
    assert [layer.type for layer in model.model.config.layers] == ["attention", "gated_deltanet", "attention"]
    assert torch.isfinite(logits).all()
    assert main(["distill", str(folders.converted), "--out", str(out), "--config", str(folders.config), "--no-progress",
                 "--resume"]) == 0  # a finished run resumes to its end again, and writes its student anew
    assert "reliance" not in capsys.readouterr().err
    assert (out / "model" / "config.json").is_file()


@pytest.mark.parametrize("case, message", [
    ("not-a-conversion", "not a conversion folder (no conversion.json; `layerzoo convert` writes one)"),
    ("teacher-missing", "conversion.json: the teacher's folder"),
    ("zero-steps", "distill.align.steps: must be >= 1, got 0"),
    ("model-set", "a distillation sets distill.* keys only"),
    ("no-peft", "distill.end_to_end.lora needs peft"),
    ("run-exists", "already holds a run"),
])
def test_bad_input_is_one_line(folders, tmp_path, capsys, monkeypatch, case, message):
    converted, extra = folders.converted, []
    if case == "not-a-conversion":
        converted = folders.teacher
    elif case == "teacher-missing":
        converted = tmp_path / "converted"
        shutil.copytree(folders.converted, converted)
        meta = json.loads((converted / "conversion.json").read_text())
        (converted / "conversion.json").write_text(json.dumps({**meta, "teacher": str(tmp_path / "gone")}))
    elif case == "zero-steps":
        extra = ["--set", "distill.align.steps=0"]
    elif case == "model-set":
        extra = ["--set", "model.d_model=64"]
    elif case == "no-peft":
        extra = ["--set", "distill.end_to_end.lora={rank: 2}"]
        monkeypatch.setitem(sys.modules, "peft", None)
    elif case == "run-exists":
        (tmp_path / "run").mkdir()
        (tmp_path / "run" / "spec.yaml").write_text("model: {}\n")
    code = main(["distill", str(converted), "--out", str(tmp_path / "run"), "--config", str(folders.config),
                 "--no-progress", *extra])
    error = capsys.readouterr().err
    assert code == 2 and message in error and error.count("\n") == 1, error
