"""`layerzoo eval --precision bf16`: every forward under bf16 autocast; perplexity within bf16's
tolerance of fp32's and not equal to it (autocast applied), NIAH run too, and each report records
the precision it ran at; a bad value is one line."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
import torch

from layerzoo.cli import main
from layerzoo.errors import OptionError
from layerzoo.testing.tolerances import TOLERANCES

pytest.importorskip("transformers")

RELATIVE, ABSOLUTE = TOLERANCES[torch.bfloat16]


def evaluate(arguments: list[str]) -> None:
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["eval", *arguments, "--no-progress"]) == 0, arguments


def perplexity_report(folders, out, precision: str) -> dict:
    """The converted student's perplexity report at 32 and 64 tokens of the held-out corpus."""
    evaluate([str(folders.converted), "--text", str(folders.corpus / "*.txt"), "--lengths", "32", "64",
              "--out", str(out), "--precision", precision])
    (report,) = out.glob("perplexity-*.json")
    return json.loads(report.read_text())


def test_bf16_perplexity_is_within_bf16_tolerance_of_fp32(folders, tmp_path):
    fp32, bf16 = (perplexity_report(folders, tmp_path / precision, precision) for precision in ("fp32", "bf16"))
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    losses = [(ours["loss"], theirs["loss"]) for ours, theirs in zip(bf16["lengths"], fp32["lengths"])]
    assert len(losses) == 2 and all(got != want for got, want in losses), losses  # autocast was applied
    assert all(abs(got - want) <= RELATIVE * want + ABSOLUTE for got, want in losses), losses


def test_auto_is_fp32_on_the_cpu_and_niah_records_its_precision(folders, tmp_path):
    assert perplexity_report(folders, tmp_path / "auto", "auto")["precision"] == "fp32"
    evaluate([str(folders.converted), "--metric", "accuracy", "--lengths", "64", "--depths", "0.5", "--samples", "2",
              "--out", str(tmp_path / "niah"), "--precision", "bf16"])
    (grid,) = (tmp_path / "niah").glob("eval-*.json")
    assert json.loads(grid.read_text())["precision"] == "bf16"


def test_a_bad_precision_is_one_line(folders):
    from layerzoo.evaluation import EvalSettings

    with pytest.raises(OptionError, match=r"^precision: expected one of auto, fp32, bf16, got 'fp16'$"):
        EvalSettings(precision="fp16")
    with pytest.raises(SystemExit), contextlib.redirect_stderr(io.StringIO()) as error:  # argparse's choices
        main(["eval", str(folders.converted), "--precision", "fp16"])
    assert "--precision: invalid choice: 'fp16' (choose from 'auto', 'fp32', 'bf16')" in error.getvalue().splitlines()[-1]
