"""A text spec end to end through the CLI: train (with TensorBoard), the unigram report, the
perplexity eval of several runs on one plot, loss curves, and the tokenizer command."""

import json

import pytest

from layerzoo.cli import main
from tests.helpers.text_corpus import cache, write_corpus  # noqa: F401 (cache is a fixture)

SPEC = """\
name: text-tiny
model:
  d_model: 32
  n_layers: 2
  vocab_size: 257
  mixers:
    swa: {n_heads: 2, window: 8}
    mlstm: {n_heads: 2, chunk_size: 16}
  pattern: [swa, mlstm]
  ffn: {hidden: 64}
training:
  task: {name: text, files: ["CORPUS/*"], holdout: 0.3}
  seq_len: 32
  steps: 3
  batch_size: 4
  window: {schedule: stochastic, short: 4, long: 8}
  eval: {every: 2, samples: 4, lengths: [16, 64]}
  log_every: 1
  log: {tensorboard: true}
"""


@pytest.fixture
def text_spec(tmp_path, cache):  # noqa: F811
    write_corpus(tmp_path / "corpus", words=120)
    path = tmp_path / "text.yaml"
    path.write_text(SPEC.replace("CORPUS", str(tmp_path / "corpus")))
    return path


def test_train_report_eval_and_plot(text_spec, tmp_path, capsys):
    runs = [tmp_path / "run-a", tmp_path / "run-b"]
    for seed, run in enumerate(runs):
        assert main(["train", str(text_spec), "--set", f"training.seed={seed}", "--out", str(run), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "unigram baseline" in out and "bits/byte" in out
    report = json.loads((runs[0] / "text-report.json").read_text())
    assert report["validation_loss"] > 0 and report["unigram_entropy"] > 0
    result = json.loads((runs[0] / "perplexity-window8.json").read_text())
    assert [row["length"] for row in result["lengths"]] == [16, 64]
    assert all(row["tokens"] == row["length"] * row["documents"] for row in result["lengths"])
    assert list((runs[0] / "tensorboard").glob("events.out.tfevents.*"))

    assert main(["eval", *map(str, runs), "--metric", "perplexity", "--lengths", "32", "128", "--window", "4",
                 "--out", str(tmp_path / "both")]) == 0
    assert (tmp_path / "both" / "perplexity-window4.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((runs[1] / "perplexity-window4.json").read_text())["run"] == "run-b"

    assert main(["plot", *map(str, runs), "--out", str(tmp_path / "loss.png")]) == 0
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"
    capsys.readouterr()
    assert main(["plot", str(tmp_path / "nothing")]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err


def test_missing_tensorboard_is_one_line(text_spec, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torch.utils.tensorboard", None)
    assert main(["train", str(text_spec), "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    error = capsys.readouterr().err
    assert "pip install 'layerzoo[tensorboard]'" in error and error.count("\n") == 1


def test_tokenizer_command_trains_a_folder_a_spec_names(text_spec, tmp_path, capsys):
    folder = tmp_path / "tok"
    assert main(["tokenizer", "train", str(tmp_path / "corpus" / "*"), "--vocab-size", "300", "--out", str(folder)]) == 0
    assert (folder / "tokenizer.json").exists()
    tokenizer = ["--set", f"training.task.tokenizer={folder}"]
    assert main(["describe", str(text_spec), *tokenizer, "--set", "model.vocab_size=300"]) == 0
    capsys.readouterr()
    assert main(["describe", str(text_spec), *tokenizer]) == 2  # 300 tokens, a model of 257
    error = capsys.readouterr().err
    assert "training.task.tokenizer: " in error and "more than the model's vocab_size 257" in error and error.count("\n") == 1
