"""NIAH's grid: the head run on the scored tail only gives the numbers the full logits give, and
the grid shows its progress and time on stderr unless told not to, with the same results."""

from __future__ import annotations

import torch
from hypothesis import given, settings, strategies as st

import layerzoo
from layerzoo.evaluation.grid import evaluate_grid
from layerzoo.tasks import IGNORE, NIAH
from layerzoo.training.objectives.language_model import score_heldout, tail_length

TINY = {"model": {"d_model": 32, "n_layers": 2, "vocab_size": 64, "mixers": {"swa": {"n_heads": 2, "window": 16},
                                                                          "attention": {"n_heads": 2}},
                  "pattern": ["swa", "attention"], "ffn": {"hidden": 64}}}


def tiny_model(seed: int = 0):
    torch.manual_seed(seed)
    return layerzoo.build(layerzoo.load_spec(TINY)).eval()


@given(rows=st.integers(1, 3), length=st.integers(1, 12), data=st.data())
@settings(max_examples=30, deadline=None)
def test_the_tail_starts_at_the_first_scored_column(rows, length, data):
    scored = torch.tensor(data.draw(st.lists(st.lists(st.booleans(), min_size=length, max_size=length),
                                             min_size=rows, max_size=rows)))
    targets = torch.where(scored, 5, IGNORE)
    tail = tail_length(targets)
    columns = scored.any(0).nonzero().flatten().tolist()
    assert tail == (length - columns[0] if columns else length)


@given(seed=st.integers(0, 2**16), length=st.sampled_from([60, 77, 96]), depth=st.sampled_from([0.0, 0.5, 1.0]))
@settings(max_examples=6, deadline=None)
def test_the_scored_tail_scores_as_the_full_logits_do(seed, length, depth):
    model, task = tiny_model(), NIAH(vocab_size=64)
    full = score_heldout(model, task, length, 3, seed, depth=depth, batch_size=2)
    tail = score_heldout(model, task, length, 3, seed, depth=depth, batch_size=2, scored_tail=True)
    assert tail["accuracy"] == full["accuracy"]
    torch.testing.assert_close(tail["loss"], full["loss"], rtol=1e-5, atol=0)


def test_the_grid_shows_its_progress_and_time_unless_told_not_to(capsys):
    model, task = tiny_model(1), NIAH(vocab_size=64, variants=("single_random", "multikey"))
    quiet = evaluate_grid(model, task, [60, 80], [0.0, 1.0], 2, 7, label="tiny")
    assert capsys.readouterr().err == ""
    shown = evaluate_grid(model, task, [60, 80], [0.0, 1.0], 2, 7, label="tiny", progress=True)
    err = capsys.readouterr().err
    assert shown == quiet
    assert err.count(" for the grid ") == 1 and "tiny: " in err, err
    assert " for the grid (at the pace of its first 60 tokens)" in err, err
