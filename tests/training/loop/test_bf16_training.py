"""training.precision: bf16 trains under bf16 autocast (weights, gradients and AdamW's moments
fp32; recurrent states fp32): from one seed its losses stay within bf16's tolerance of fp32's and
differ from them, on a model with an SWA, a Gated DeltaNet and an mLSTM layer."""

from __future__ import annotations

import pytest
import torch

import layerzoo
from layerzoo.testing.tolerances import TOLERANCES
from layerzoo.training.loop.trainer import train
from tests.helpers.run_checks import metric_records

RELATIVE, ABSOLUTE = TOLERANCES[torch.bfloat16]
HYBRID = ["model.n_layers=3", "model.pattern=[swa, gated_deltanet, mlstm]", "model.mixers.gated_deltanet.n_heads=2",
          "model.mixers.mlstm.n_heads=2", "training.steps=4", "training.eval.lengths=[32]"]


def losses(tiny_spec, folder, precision: str) -> tuple[list[float], dict]:
    """(the loss of each step, the last record) of a run of the hybrid at `precision`."""
    train(layerzoo.load_spec(tiny_spec, [*HYBRID, f"training.precision={precision}"]), run_dir=folder, progress=False)
    records = metric_records(folder)
    return [record["loss"] for record in records if "tokens" in record], records[-1]


def test_bf16_training_stays_within_bf16_tolerance_of_fp32(tiny_spec, tmp_path):
    (fp32, fp32_last), (bf16, bf16_last) = (losses(tiny_spec, tmp_path / precision, precision)
                                            for precision in ("fp32", "bf16"))
    assert len(bf16) == len(fp32) == 4 and bf16 != fp32  # autocast was applied
    for got, want in [*zip(bf16, fp32), (bf16_last["eval_loss"], fp32_last["eval_loss"])]:
        assert got == pytest.approx(want, rel=RELATIVE, abs=ABSOLUTE)
