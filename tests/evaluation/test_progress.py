"""A measure's progress: its time estimate printed once, after the first step, on stderr; nothing
when off; durations in a reader's words."""

from __future__ import annotations

import contextlib
import io

from hypothesis import given, strategies as st

from layerzoo.evaluation.progress import Progress, duration


@given(steps=st.lists(st.integers(1, 1000), min_size=2, max_size=5))
def test_the_estimate_is_one_line_after_the_first_step(steps):
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        with Progress(sum(steps), "model", "the grid", enabled=False) as bar:
            for tokens in steps:
                bar.advance(tokens)
    assert err.getvalue() == ""
    with contextlib.redirect_stderr(err):
        with Progress(sum(steps), "model", "the grid") as bar:
            for tokens in steps:
                bar.advance(tokens)
    assert err.getvalue().count("model: ") >= 1
    assert err.getvalue().count(" for the grid ") == 1
    assert f" for the grid (at the pace of its first {steps[0]:,} tokens)" in err.getvalue()


@given(seconds=st.floats(0, 1e6))
def test_a_duration_is_in_minutes_or_under_one(seconds):
    text = duration(seconds)
    assert text == "under a minute" if seconds < 60 else text == f"about {round(seconds / 60)} min"
