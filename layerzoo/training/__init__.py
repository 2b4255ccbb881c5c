"""Training: the spec's `training:` section (`config`) and its errors, then one sub-package an
idea, lowest first: `parallel` (data-parallel and FSDP), `runs` (run folders, checkpoints, metrics
logs and their plots, what a finished run says), `objectives` (what a model is trained on:
language modelling, distillation's stages), `loop` (the one resumable training loop, its
schedules and curriculum, stop signals; `train`, a spec trained in a run folder), `distill` (a
converted model distilled from its teacher: the `distill:` section, its stages, the reliance
measure) and `sweeps` (grids of runs and their comparison).

Only the configs are imported eagerly (they register the `training:` and `distill:` sections with
specs); the trainer and its dependencies load on first use, so `import layerzoo` stays light.
"""

from __future__ import annotations

import importlib

from .config import TrainingConfig
from .distill.config import DistillConfig

_LAZY = {
    "train": "loop.trainer", "TrainingError": "errors", "RunResult": "loop.trainer", "TrainingInterrupted": "loop.interrupt",
    "run_loop": "loop.loop", "LoopSettings": "loop.loop", "Objective": "objectives.base",
    "save_checkpoint": "runs.checkpoint", "load_weights": "runs.checkpoint", "latest_checkpoint": "runs.run_checkpoints",
    "CheckpointError": "runs.checkpoint", "UnusableCheckpoint": "runs.checkpoint",
}
# Names that moved to layerzoo.evaluation (scoring above training, beside reading runs and folders).
_MOVED = {"evaluate": "layerzoo.evaluation.evaluate", "evaluate_grid": "layerzoo.evaluation.evaluate_grid",
          "grid_report": "layerzoo.evaluation.grid_report", "plot_heatmap": "layerzoo.evaluation.plot_heatmap"}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    if name in _MOVED:
        raise AttributeError(f"layerzoo.training.{name} is now {_MOVED[name]}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DistillConfig", "TrainingConfig", *_LAZY]
