"""Metrics as TensorBoard events, beside metrics.jsonl, for watching a run live (`training.log:
{tensorboard: true}`; the `tensorboard` extra)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ..errors import TrainingError


class TensorBoardLog:
    """Writes each record's finite numbers as scalars at its step. purge_step: a resumed run's
    first step, so that TensorBoard drops what an interrupted run logged past its checkpoint."""

    def __init__(self, folder: Path, purge_step: int):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:
            raise TrainingError("training.log.tensorboard needs the tensorboard package: "
                                "pip install 'layerzoo[tensorboard]'") from None
        self.writer = SummaryWriter(str(folder), purge_step=purge_step)

    def write(self, record: dict[str, Any]) -> None:
        for key, value in record.items():
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            if key != "step" and number and math.isfinite(value):
                self.writer.add_scalar(key, value, record["step"])

    def close(self) -> None:
        self.writer.close()
