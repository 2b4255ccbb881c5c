"""Training and evaluation: the spec's `training:` section (`config`) and its errors, then one
sub-package an idea, lowest first: `parallel` (data-parallel and FSDP), `runs` (run folders,
checkpoints, metrics logs, what a finished run says), `evaluation` (NIAH grids, perplexity against
length), `reports` (the reports and plots a run writes), `loop` (the trainer, its schedules and
curriculum, stop signals), `distill` (a converted model distilled from its teacher: the `distill:`
section, its two stages) and `sweeps` (grids of runs and their comparison).

Only the configs are imported eagerly (they register the `training:` and `distill:` sections with
specs); the trainer and its dependencies load on first use, so `import layerzoo` stays light.
"""

from __future__ import annotations

import importlib

from .config import TrainingConfig
from .distill.config import DistillConfig

_LAZY = {
    "train": "loop.trainer", "TrainingError": "errors", "RunResult": "loop.trainer", "TrainingInterrupted": "loop.interrupt",
    "save_checkpoint": "runs.checkpoint", "load_weights": "runs.checkpoint", "latest_checkpoint": "runs.run_checkpoints",
    "CheckpointError": "runs.checkpoint", "UnusableCheckpoint": "runs.checkpoint", "evaluate": "evaluation.evaluate",
    "evaluate_grid": "evaluation.evaluate", "grid_report": "reports.report", "plot_heatmap": "reports.heatmap",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DistillConfig", "TrainingConfig", *_LAZY]
