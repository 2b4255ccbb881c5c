"""`layerzoo eval` of a distill run: its student beside its teacher (perplexity against context
length, NIAH in the tokenizer's tokens), the same numbers as each model folder evaluated alone, a
teacher folder and students on one plot; and each bad input as one line."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil

import pytest
import torch

from layerzoo.cli import main
from layerzoo.tasks import IGNORE, NIAH
from layerzoo.tasks.niah import in_tokens
from tests.helpers.conversion import teacher_spec, write_teacher

transformers = pytest.importorskip("transformers")

LENGTHS = ["32", "64", "128", "256", "512"]  # the default: the distillation length (32) times 1, 2, 4, 8, 16


def printed(arguments: list[str]) -> str:
    """What `layerzoo ARGUMENTS` prints (it must succeed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(arguments) == 0, arguments
    return out.getvalue()


@pytest.fixture(scope="module")
def run(folders):
    """The conversion distilled for two steps a stage, then `layerzoo eval RUN` (what it printed)."""
    run = folders.root / "run"
    assert main(["distill", str(folders.converted), "--out", str(run), "--config", str(folders.config),
                 "--no-progress"]) == 0
    return type("Run", (), {"folder": run, "printed": printed(["eval", str(run)])})


def row(text: str, label: str) -> list[str]:
    """The cells of the comparison table's row of `label` (after the label)."""
    line = next(line for line in text.splitlines() if line.startswith(label + "  "))
    return line[len(label):].split()


def test_eval_of_a_distill_run_tables_the_teacher_beside_the_student(run):
    text = run.printed
    assert re.search(r"^model +state@512 \(floats\) +32 +64 +128 +256 +512$", text, re.M), text
    teacher, student = row(text, "teacher (teacher)"), row(text, "run (student)")
    assert len(teacher) == len(student) == 6
    assert int(teacher[0].replace(",", "")) > int(student[0].replace(",", ""))  # layer 1's KV cache became a GDN state
    report = json.loads((run.folder / "perplexity-teacher-windowspec.json").read_text())
    assert report["kind"] == "teacher" and report["source"].endswith("teacher") and report["train_length"] is None
    report = json.loads((run.folder / "perplexity-windowspec.json").read_text())
    assert report["kind"] == "student" and report["train_length"] == 32 and report["state"]["length"] == 512
    assert f"{report['lengths'][0]['perplexity']:.2f}" == student[1]
    assert (run.folder / "perplexity-windowspec.png").read_bytes()[:4] == b"\x89PNG"


def test_each_row_is_its_model_folder_evaluated_alone(run, folders, tmp_path):
    """The teacher's row is its folder's, the student's the run's model/ folder's, each given the
    run's text by flag (its held-out quarter) and the run's lengths."""
    text = ["--text", str(folders.corpus / "*.txt"), "--holdout", "0.25", "--lengths", *LENGTHS, "--out", str(tmp_path)]
    for folder, alone, beside in ((folders.teacher, "perplexity-teacher-windowspec", "perplexity-teacher-windowspec"),
                                  (run.folder / "model", "perplexity-model-windowspec", "perplexity-windowspec")):
        printed(["eval", str(folder), *text])
        ours, theirs = (json.loads(path.read_text()) for path in (tmp_path / f"{alone}.json",
                                                                  run.folder / f"{beside}.json"))
        assert ours["kind"] == "model" and ours["lengths"] == theirs["lengths"] and ours["buckets"] == theirs["buckets"]
        assert any(row["documents"] for row in ours["lengths"])


def test_a_teacher_folder_and_a_run_on_one_plot(run, folders, tmp_path):
    """The teacher folder reads the run's text with its own tokenizer; the run's teacher, the same
    folder, is evaluated once."""
    text = printed(["eval", str(folders.teacher), str(run.folder), "--lengths", "32", "64", "--out", str(tmp_path)])
    table = text[text.index("each model beside the others"):]
    assert [line.split()[0] for line in table.splitlines()[1:-1]] == ["model", "teacher", "run"], table
    assert row(table, "teacher")[1:] == row(run.printed, "teacher (teacher)")[1:3]  # perplexity at 32 and 64
    assert (tmp_path / "perplexity-windowspec.png").is_file() and (tmp_path / "perplexity-teacher-windowspec.json").is_file()


def test_niah_in_the_tokenizers_tokens_beside_the_teacher(run):
    """At the run's lengths that NIAH's examples fit in (60 tokens and more: not 32)."""
    text = printed(["eval", str(run.folder), "--metric", "accuracy", "--depths", "0.5", "--samples", "5"])
    table = text[text.index("NIAH accuracy (%)"):]
    assert len(row(table, "teacher (teacher)")) == len(row(table, "run (student)")) == 4
    for name in ("eval-teacher-windowspec", "eval-windowspec"):
        grid = json.loads((run.folder / f"{name}.json").read_text())
        assert grid["lengths"] == [64, 128, 256, 512] and grid["depths"] == [0.5] and grid["tokenizer"]
        assert (run.folder / f"{name}.png").read_bytes()[:4] == b"\x89PNG"


def test_qa_on_the_runs_passages_beside_the_teacher(run):
    """At the run's lengths a qa example fits in, on the run's held-out text: exact-match accuracies."""
    text = printed(["eval", str(run.folder), "--metric", "qa", "--depths", "0", "1", "--samples", "3"])
    table = text[text.index("QA exact-match accuracy (%)"):]
    assert len(row(table, "teacher (teacher)")) == len(row(table, "run (student)"))
    for name in ("qa-teacher-windowspec", "qa-windowspec"):
        grid = json.loads((run.folder / f"{name}.json").read_text())
        assert grid["task"] == "qa" and grid["depths"] == [0, 1] and grid["lengths"][-1] == 512
        assert all(value in (0, 1 / 3, 2 / 3, 1) for row_ in grid["accuracy"] for value in row_)  # whole answers of 3


def test_token_niah_is_niah_written_in_the_given_tokens():
    tokens = list(range(1000, 1100))
    mapped = in_tokens(tokens, seed=3)
    plain = NIAH(vocab_size=100)
    table = torch.tensor(mapped.tokens)
    assert sorted(mapped.tokens) == tokens
    for seed in range(5):
        ours, theirs = mapped.batch(80, [seed], depth=0.25), plain.batch(80, [seed], depth=0.25)
        assert torch.equal(ours.input_ids, table[theirs.input_ids])
        scored = theirs.targets != IGNORE
        assert torch.equal(ours.targets[scored], table[theirs.targets[scored]]) and (ours.targets[~scored] == IGNORE).all()
    with pytest.raises(ValueError, match="has 63 ordinary tokens"):
        in_tokens(range(63))


@pytest.mark.parametrize("case, message", [
    ("empty", "no checkpoint there, and not a distill run or a model folder"),
    ("no-text", "a model folder brings no text: give --text FILES"),
    ("no-lengths", "give --lengths (a model folder does not say what length it was trained at)"),
    ("no-out", "give --out, the folder for its report"),
    ("big-tokenizer", "has 80 tokens, more than the model's vocab_size 64"),
    ("big-tokenizer-niah", "has 80 tokens, more than the model's vocab_size 64"),
    ("holdout-alone", "--text: needed with field or holdout"),
    ("niah-too-short", "--lengths: an example of niah needs >= 60 tokens, got 32"),
    ("qa-no-text", "--metric qa needs text for its passages (--text)"),
    ("unfinished", "the distill run has not finished"),
    ("teacher-gone", "the teacher's folder"),
])
def test_bad_input_is_one_line(run, folders, tmp_path, capsys, case, message):
    text = ["--text", str(folders.corpus / "*.txt")]
    arguments = {"empty": [str(tmp_path)],
                 "no-text": [str(folders.teacher), "--lengths", "32", "--out", str(tmp_path)],
                 "no-lengths": [str(folders.teacher), *text, "--out", str(tmp_path)],
                 "no-out": [str(folders.teacher), *text, "--lengths", "32"],
                 "big-tokenizer": [str(tmp_path / "big"), *text, "--lengths", "32", "--out", str(tmp_path)],
                 "big-tokenizer-niah": [str(tmp_path / "big"), "--metric", "accuracy", "--lengths", "64", "--out",
                                        str(tmp_path)],
                 "holdout-alone": [str(run.folder), "--holdout", "0.5"],
                 "niah-too-short": [str(run.folder), "--metric", "accuracy", "--lengths", "32", "64"],
                 "qa-no-text": [str(folders.teacher), "--metric", "qa", "--lengths", "512", "--out", str(tmp_path)],
                 "unfinished": [str(tmp_path / "run")], "teacher-gone": [str(tmp_path / "run")]}[case]
    if case.startswith("big-tokenizer"):  # its tokenizer (80 tokens) is larger than its model's vocabulary
        write_teacher(folders.corpus, tmp_path / "big", teacher_spec(vocab_size=64))
    if case in ("unfinished", "teacher-gone"):
        shutil.copytree(run.folder, tmp_path / "run", ignore=shutil.ignore_patterns("align", "end_to_end"))
        if case == "unfinished":
            shutil.rmtree(tmp_path / "run" / "model")
        else:
            report = json.loads((tmp_path / "run" / "distill-report.json").read_text())
            (tmp_path / "run" / "distill-report.json").write_text(json.dumps({**report, "teacher": str(tmp_path / "gone")}))
    capsys.readouterr()
    assert main(["eval", *arguments]) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error


def test_an_swa_student_is_saved_and_evaluated_at_the_window_it_was_distilled_at(folders, tmp_path):
    """A student whose layer 0 became SWA (window 8), distilled at windows 4 and 16: model/ runs at
    16, and so does the student's row of `layerzoo eval RUN`, as that folder alone."""
    import yaml

    from tests.training.distill.conftest import SWA_GDN, settings

    (tmp_path / "pattern.yaml").write_text(yaml.safe_dump(SWA_GDN))
    converted, run, config = tmp_path / "converted", tmp_path / "run", tmp_path / "distill.yaml"
    assert main(["convert", str(folders.teacher), "--pattern", str(tmp_path / "pattern.yaml"), "--out", str(converted)]) == 0
    stage = {"steps": 2, "batch_size": 2, "seq_len": 32}
    config.write_text(yaml.safe_dump({"distill": settings(folders, align=stage, end_to_end=stage, window={
        "schedule": "stochastic", "short": 4, "long": 16})}))
    assert main(["distill", str(converted), "--out", str(run), "--config", str(config), "--no-progress"]) == 0
    saved = json.loads((run / "model" / "config.json").read_text())["model_spec"]
    assert saved["mixers"]["swa"]["window"] == 16 and "overrides" not in saved
    printed(["eval", str(run), "--lengths", "32", "128"])
    printed(["eval", str(run / "model"), "--text", str(folders.corpus / "*.txt"), "--holdout", "0.25", "--lengths", "32",
             "128", "--out", str(tmp_path / "alone")])
    beside = json.loads((run / "perplexity-window16.json").read_text())
    alone = json.loads((tmp_path / "alone" / "perplexity-model-windowspec.json").read_text())
    assert beside["window"] == 16 and beside["lengths"] == alone["lengths"] and beside["state"] == alone["state"]
