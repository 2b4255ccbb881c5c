"""A tiny conversion to distil: a three-layer attention teacher (a layerzoo folder) on a corpus of
eight documents with a tokenizer trained on them, converted by layerzoo.convert into students
with some layers replaced; settings of a few steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from layerzoo.convert import convert
from layerzoo.training.distill.config import distillation_spec
from tests.helpers.conversion import write_teacher, write_text

GDN = "attention,gated_deltanet,attention"  # layer 1 Gated DeltaNet
SWA_GDN = {"mixers": {"swa": {"type": "swa", "window": 8}},  # layer 0 SWA (window 8), layer 1 Gated DeltaNet
           "layers": ["swa", "gated_deltanet", "attention"]}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """The corpus folder and the teacher's folder, its tokenizer trained on the corpus (shared by a
    module's tests: nothing writes to them)."""
    folder = tmp_path_factory.mktemp("text")
    corpus = write_text(folder / "corpus")
    return SimpleNamespace(corpus=corpus, teacher=write_teacher(corpus, folder / "teacher"))


def settings(text, **changes) -> dict:
    """A distill: mapping of a few steps of 2 windows of 32 tokens each stage; `changes` replace its keys."""
    base = {"data": {"files": [str(text.corpus / "*.txt")], "holdout": 0.25},
            "align": {"steps": 6, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 1e-2}},
            "end_to_end": {"steps": 6, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 3e-3}},
            "eval": {"samples": 4, "batch_size": 4}, "log_every": 1}
    return {**base, **changes}


def make(text, pattern=GDN, seed: int = 0, **changes):
    """(conversion, spec): the teacher folder converted by `pattern` (layerzoo.convert's; the
    student's own init drawn from `seed`), under settings(text, **changes)."""
    conversion = convert(text.teacher, pattern, seed=seed)
    return conversion, distillation_spec(conversion.student.config, settings(text, **changes))
