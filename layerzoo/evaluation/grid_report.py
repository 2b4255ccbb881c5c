"""The length x depth evaluation of a trained model: table on stdout, JSON and heatmap PNG on disk."""

from __future__ import annotations

import json
from pathlib import Path

from torch import nn

from ..specs import Spec
from ..tasks import Task, report_seed
from ..training.objectives.batches import LOCAL
from ..training.parallel.distributed import Context
from ..training.runs.folder import report_stem
from .grid import evaluate_grid, format_table
from .heatmap import plot_heatmap


def grid_report(model: nn.Module, spec: Spec, task: Task, out_dir: str | Path, *, lengths: list[int] | None = None,
                depths: list[float] | None = None, window: int | None = None, samples: int | None = None,
                context: Context = LOCAL, autocast=None, about: dict | None = None, progress: bool = False) -> dict:
    """Evaluate the grid (None: the spec's training.eval value; `progress`: its bar and time
    estimate on stderr), print the table, write <out_dir>/eval-window<W>.json (with `about`'s keys
    too) and .png (rank 0 only); returns the grid."""
    config = spec.training.eval
    lengths = list((config.lengths or [spec.training.seq_len]) if lengths is None else lengths)
    depths = list(config.depths if depths is None else depths)
    window = spec.training.test_window if window is None else window
    samples = config.samples if samples is None else samples
    return write_grid(model, task, Path(out_dir) / report_stem("eval", window), lengths, depths, samples,
                      label=spec.name or "model", spec=spec.name, train_length=trained_length(spec, model),
                      seed=report_seed(spec.training.seed), window=window, batch_size=config.batch_size, context=context,
                      autocast=autocast, about=about, progress=progress)


def write_grid(model: nn.Module, task: Task, stem: str | Path, lengths: list[int], depths: list[float], samples: int, *,
               label: str, spec: str | None = None, train_length: int | None = None, seed: int = 2,
               window: int | None = None, batch_size: int = 16, context: Context = LOCAL, autocast=None,
               about: dict | None = None, progress: bool = False) -> dict:
    """evaluate_grid of `model` (named `label`; `seed` draws the examples; `progress`: its bar and
    time estimate on stderr), print the table, write <stem>.json (with `about`'s keys too) and .png
    (rank 0 only); returns the grid."""
    extra = {} if autocast is None else {"autocast": autocast}
    grid = evaluate_grid(model, task, lengths, depths, samples, seed, window=window, batch_size=batch_size,
                         context=context, label=label, progress=progress, **extra)
    grid = {"spec": spec, **(about or {}), "task": task.name, "train_length": train_length, **grid}
    if context.is_main:
        stem = Path(stem)
        stem.parent.mkdir(parents=True, exist_ok=True)
        Path(f"{stem}.json").write_text(json.dumps(grid, indent=1))
        plot_heatmap(grid, f"{stem}.png", title=f"{label}: {task.name} accuracy", train_length=train_length)
        trained = "" if train_length is None else f", trained at length {train_length}"
        print(f"{label}: {task.name} accuracy (%), test window {window or 'as in spec'}{trained}:")
        print(format_table(grid))
        print(f"wrote {stem}.json and {stem}.png")
    return grid


def trained_length(spec: Spec, model: nn.Module) -> int:
    """The longest sequence training saw: seq_len, or with a segment curriculum its last stage's
    segment count times the segment size."""
    curriculum = spec.training.curriculum
    if curriculum is None or not curriculum.segments:
        return spec.training.seq_len
    size = curriculum.segment_size or getattr(getattr(model, "module", model), "segment_size", None)
    return max(curriculum.segments) * size if size else spec.training.seq_len
