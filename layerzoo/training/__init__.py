"""Training and evaluation: the spec's `training:` section, the trainer, checkpoints, NIAH grids.

Only the config is imported eagerly (specs validate against it); the rest loads on first use.
"""

from __future__ import annotations

import importlib

from .config import TrainingConfig

_LAZY = {
    "train": "trainer", "Trainer": "trainer", "load_checkpoint": "checkpoint", "save_checkpoint": "checkpoint",
    "CheckpointError": "checkpoint", "evaluate_grid": "evaluate", "plot_heatmap": "heatmap",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["TrainingConfig", *_LAZY]
