"""`layerzoo eval` on SmolLM2-135M-Instruct's GGUF file at two lengths: NIAH in the tokenizer's
tokens (the pretrained model recalls needles: above chance, which is about 1 in 49,152) and
perplexity on Python source (a pretrained model's: far under the vocabulary's size)."""

import json
import math

import pytest

from layerzoo.cli import main

pytestmark = pytest.mark.real

LENGTHS = ("64", "128")


def test_niah_in_tokens_at_two_lengths(smollm2_gguf, tmp_path):
    assert main(["eval", str(smollm2_gguf), "--metric", "accuracy", "--lengths", *LENGTHS, "--depths", "0.5",
                 "--samples", "1", "--out", str(tmp_path), "--no-progress"]) == 0
    report = json.loads((tmp_path / f"eval-{smollm2_gguf.stem}-windowspec.json").read_text())
    assert report["lengths"] == [64, 128] and report["depths"] == [0.5]
    (row,) = report["accuracy"]
    assert len(row) == 2 and all(0.0 <= accuracy <= 1.0 for accuracy in row)
    assert max(row) > 0.25


def test_perplexity_at_two_lengths(smollm2_gguf, tmp_path):
    assert main(["eval", str(smollm2_gguf), "--text", "stdlib:json/*.py", "--lengths", *LENGTHS, "--samples", "1",
                 "--out", str(tmp_path), "--no-progress"]) == 0
    (path,) = tmp_path.glob("perplexity-*.json")
    rows = json.loads(path.read_text())["lengths"]
    assert [row["length"] for row in rows] == [64, 128]
    assert all(math.isfinite(row["perplexity"]) and 1.0 < row["perplexity"] < 50.0 for row in rows)
