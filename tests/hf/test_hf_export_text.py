"""A text run with a trained BPE (swax-text-tiny, shrunk), exported: the folder carries the run's
tokenizer, AutoTokenizer loads it, and `layerzoo lm-eval` runs a local task on it."""

import pytest
from transformers import AutoTokenizer

from layerzoo.cli import main
from layerzoo.tasks.text import load_tokenizer
from tests.helpers.lm_eval_tasks import run_tasks
from tests.helpers.text_corpus import write_corpus

TINY_TEXT_RUN = ["--set", "model.vocab_size=300", "--set", "training.task.tokenizer=bpe:300",
                 "--set", "training.task.holdout=0.3", "--set", "training.steps=2", "--set", "training.seq_len=32",
                 "--set", "training.batch_size=2", "--set", "training.eval.samples=2",
                 "--set", "training.eval.lengths=[32]", "--set", "training.eval.documents=1",
                 "--set", "training.eval.batch_size=2", "--no-progress"]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run folder, exported folder) of swax-text-tiny trained two steps on a tiny corpus with bpe:300."""
    root = tmp_path_factory.mktemp("text-export")
    write_corpus(root / "corpus", words=80)
    files = f"training.task.files=[{root / 'corpus'}/*]"
    assert main(["train", "swax-text-tiny", "--set", files, *TINY_TEXT_RUN, "--out", str(root / "run")]) == 0
    assert main(["export", str(root / "run"), str(root / "hf")]) == 0
    return root / "run", root / "hf"


def test_the_export_of_a_bpe_run_carries_its_tokenizer(exported):
    run, folder = exported
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert sorted(path.name for path in (run / "tokenizer").iterdir()) == ["tokenizer.json", "tokenizer_config.json"]
    trained = load_tokenizer(str(run / "tokenizer"))  # the one the run trained on, kept in the run folder
    assert tokenizer.vocab_size == trained.vocab_size == 300 and tokenizer.eos_token == "<|endoftext|>"
    text = "def f(self, value):\n    return value é"
    assert tokenizer(text)["input_ids"] == trained.encode_batch([text])[0].tolist()
    assert tokenizer.eos_token_id == trained.eos_id


def test_lm_eval_runs_on_the_exported_text_run(exported, tmp_path):
    _, folder = exported
    scores = run_tasks(folder, tmp_path, stop="<|endoftext|>")
    assert 0 <= scores["tiny_choice"]["acc,none"] <= 1 and 0 <= scores["tiny_gen"]["exact_match,none"] <= 1
