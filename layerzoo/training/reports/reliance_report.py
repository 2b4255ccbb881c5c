"""The reliance measure of a model as a run reports it: a table on stdout, reliance.json on disk."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...tasks import Task
from ..evaluation.reliance import format_reliance, reliance


def reliance_report(model: nn.Module, task: Task, seq_len: int, out_dir: str | Path, *, teacher: nn.Module | None = None,
                    samples: int = 16, batch_size: int = 8, seed: int = 0, device: torch.device | str = "cpu",
                    echo: Callable[[str], Any] | None = print) -> dict[str, Any]:
    """Measure reliance (evaluation.reliance: every recurrent layer zeroed in turn), write
    <out_dir>/reliance.json, and echo the table (None: silently); returns the measure."""
    result = reliance(model, task, seq_len, teacher=teacher, samples=samples, batch_size=batch_size, seed=seed,
                      device=device)
    path = Path(out_dir) / "reliance.json"
    path.write_text(json.dumps(result, indent=1))
    if echo is not None:
        echo(f"reliance: held-out loss and KL to the teacher with each recurrent layer's mixer output zeroed "
             f"({samples} windows of {seq_len} tokens):")
        echo(format_reliance(result))
        echo(f"wrote {path}")
    return result
