"""A tiny conversion to distil: a three-layer attention teacher on a corpus of eight documents
with a tokenizer trained on them, and students with some layers swapped; settings of a few steps."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from layerzoo.training.distill.config import distillation_spec
from tests.helpers.conversion import StandInConversion, teacher_spec, write_text, write_tokenizer

GDN = {"type": "gated_deltanet", "n_heads": 2}
SWA = {"type": "swa", "n_heads": 2, "window": 8}


@pytest.fixture(scope="module")
def text(tmp_path_factory):
    """The corpus folder and the teacher's tokenizer folder (shared by a module's tests: nothing writes to them)."""
    folder = tmp_path_factory.mktemp("text")
    corpus = write_text(folder / "corpus")
    return SimpleNamespace(corpus=corpus, tokenizer=write_tokenizer(corpus, folder / "teacher"))


def settings(text, **changes) -> dict:
    """A distill: mapping of a few steps of 2 windows of 32 tokens each stage; `changes` replace its keys."""
    base = {"data": {"files": [str(text.corpus / "*.txt")], "holdout": 0.25},
            "align": {"steps": 6, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 1e-2}},
            "end_to_end": {"steps": 6, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 3e-3}},
            "eval": {"samples": 4, "batch_size": 4}, "log_every": 1}
    return {**base, **changes}


def make(text, mixers=None, seed: int = 0, **changes):
    """(conversion, spec): the teacher with `mixers` ({layer: mixer}; default layer 1 Gated DeltaNet) swapped in."""
    conversion = StandInConversion.build(teacher_spec(), {1: GDN} if mixers is None else mixers, text.tokenizer, seed)
    return conversion, distillation_spec(conversion.student.config, settings(text, **changes))
