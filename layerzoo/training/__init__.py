"""Training and evaluation: the spec's `training:` section, the trainer, checkpoints, NIAH grids.

Only the config is imported eagerly (it registers the `training:` section with specs); the
trainer and its dependencies load on first use, so `import layerzoo` stays light.
"""

from __future__ import annotations

import importlib

from .config import TrainingConfig

_LAZY = {
    "train": "trainer", "TrainingError": "errors", "RunResult": "trainer", "TrainingInterrupted": "interrupt",
    "save_checkpoint": "checkpoint", "load_weights": "checkpoint", "latest_checkpoint": "run_checkpoints",
    "CheckpointError": "checkpoint", "UnusableCheckpoint": "checkpoint", "evaluate": "evaluate", "evaluate_grid": "evaluate",
    "grid_report": "report", "plot_heatmap": "heatmap",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TrainingConfig", *_LAZY]
