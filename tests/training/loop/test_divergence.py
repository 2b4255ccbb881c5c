"""A non-finite loss or gradient stops the run with a clear error, and no checkpoint holds it."""

import pytest
import torch
from safetensors.torch import load_file

from layerzoo.training.loop.trainer import TrainingError, train
from tests.helpers.run_checks import checkpoint_steps, metric_records


def test_a_diverging_run_stops_before_a_non_finite_checkpoint(tiny_spec, tmp_path):
    run = tmp_path / "run"
    settings = ["training.optimizer.lr=1e30", "training.checkpoint_every=1", "training.steps=6"]
    with pytest.raises(TrainingError, match=r"step 2: non-finite loss or gradient .*grad norm nan.*"
                                             r"last checkpoint is \S+/step-00000001") as raised:
        train(tiny_spec, settings, run_dir=run, progress=False)
    assert "\n" not in str(raised.value)
    assert checkpoint_steps(run) == [1]
    weights = load_file(run / "checkpoints" / "step-00000001" / "model.safetensors")
    assert all(torch.isfinite(tensor).all() for tensor in weights.values())
    assert [record["step"] for record in metric_records(run)] == [1]  # strict JSON, nothing past the last good step
