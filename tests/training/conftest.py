"""A finished sweep of the tiny spec (tests/conftest.py: tiny_spec), shared by the sweep and compare tests."""

import textwrap

import pytest

from tests.helpers.tiny import TINY


# The tiny spec on NIAH, cut to seconds a run: 3 steps, two lengths, two depths, 2 examples per
# variant and cell; a checkpoint at step 2 too, so that a run can be cut back to it and resumed.
SWEEP_SETTINGS = ["training.task={name: niah, key_len: 1, value_len: 1}", "training.seq_len=48", "training.steps=3",
                  "training.eval.lengths=[48, 96]", "training.eval.depths=[0, 1]", "training.eval.samples=10",
                  "training.checkpoint_every=2"]


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory):
    """A finished sweep of the tiny spec, shared by the sweep and compare tests (it costs four
    training processes): training.window.long = 8, 16 x 2 seeds, 2 processes at a time.
    Tests that change it work on a copy."""
    from types import SimpleNamespace

    from layerzoo.training.sweeps.sweep import run_sweep

    folder = tmp_path_factory.mktemp("sweep")
    spec = folder / "tiny.yaml"
    spec.write_text(textwrap.dedent(TINY))
    lines = []
    grid = ["training.window.long=8,16"]
    outcomes = run_sweep(str(spec), grid, 2, folder / "out", jobs=2, overrides=SWEEP_SETTINGS, echo=lines.append)
    argv = [str(spec), "--grid", *grid, "--seeds", "2", *(arg for item in SWEEP_SETTINGS for arg in ("--set", item))]
    return SimpleNamespace(spec=spec, out=folder / "out", outcomes=outcomes, output="\n".join(lines), argv=argv)
