"""`layerzoo export RUN OUT_DIR` from a tiny training run, then lm-evaluation-harness on the folder
with a local task (no downloads), through `layerzoo lm-eval`."""

import pytest
import torch
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoTokenizer, PreTrainedTokenizerFast

import layerzoo
from layerzoo.cli import main
from layerzoo.hf import LayerzooForCausalLM
from layerzoo.training.runs.checkpoint import load_weights, save_checkpoint
from tests.helpers.lm_eval_tasks import run_tasks

WORDS = "the a cat dog sat ran on mat log is red blue what color sky grass green".split()
SHORT_RUN = ["--set", "training.steps=2", "--set", "training.batch_size=4", "--set", "training.eval.lengths=[64]",
             "--set", "training.eval.samples=2", "--set", "training.eval.depths=[0.5]", "--no-progress"]


def save_tokenizer(folder) -> None:
    """A word-level tokenizer of WORDS, saved as a tokenizer's save_pretrained does."""
    vocab = {word: index for index, word in enumerate(["<eos>", "<unk>", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", unk_token="<unk>", pad_token="<eos>",
                            model_input_names=["input_ids", "attention_mask"]).save_pretrained(folder)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(run folder, exported folder) of `swa-niah-tiny` trained two steps, with a tokenizer."""
    root = tmp_path_factory.mktemp("export")
    assert main(["train", "swa-niah-tiny", *SHORT_RUN, "--out", str(root / "run")]) == 0
    save_tokenizer(root / "run" / "tokenizer")
    assert main(["export", str(root / "run"), str(root / "hf")]) == 0
    return root / "run", root / "hf"


def test_export_writes_the_checkpoints_weights_and_the_runs_tokenizer(exported):
    run, folder = exported
    model = LayerzooForCausalLM.from_pretrained(folder)
    trained = layerzoo.build(run / "spec.yaml")
    load_weights(next((run / "checkpoints").iterdir()), trained)
    ids = torch.randint(0, 256, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(model(ids).logits, trained(ids), rtol=0, atol=0)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert tokenizer("the cat sat")["input_ids"] == [2, 4, 6] and tokenizer.eos_token == "<eos>"


def test_lm_eval_runs_a_local_task_on_the_exported_folder(exported, tmp_path):
    pytest.importorskip("lm_eval", reason="lm-evaluation-harness is the eval extra's")
    _, folder = exported
    scores = run_tasks(folder, tmp_path, stop="<eos>")
    assert 0 <= scores["tiny_choice"]["acc,none"] <= 1 and 0 <= scores["tiny_gen"]["exact_match,none"] <= 1


def test_bad_exports_are_one_line_errors(exported, tmp_path, capsys):
    run, folder = exported
    torch.manual_seed(0)
    armt = layerzoo.build("armt-tiny")
    spec = layerzoo.load_spec("armt-tiny")
    save_checkpoint(tmp_path / "armt" / "checkpoints" / "step-00000001", armt, torch.optim.AdamW(armt.parameters()), spec, 1)
    (tmp_path / "no-checkpoints").mkdir()
    cases = [([str(tmp_path / "missing"), str(tmp_path / "a")], "no such run folder"),
             ([str(run), str(folder)], "exists and is not an empty folder"),
             ([str(tmp_path / "no-checkpoints"), str(tmp_path / "b")], "no checkpoint there"),
             ([str(tmp_path / "armt"), str(tmp_path / "c")], "ARMT models are not exported to transformers")]
    for arguments, words in cases:
        capsys.readouterr()
        assert main(["export", *arguments]) == 2, arguments
        error = capsys.readouterr().err
        assert words in error and error.count("\n") == 1, error
