"""NIAH's accuracy grid: a model scored at each context length x needle depth, at a test window,
and its table."""

from __future__ import annotations

import contextlib
import dataclasses
import math

from torch import nn

from ..mixers import at_window
from ..tasks import Task
from ..training.objectives.batches import LOCAL
from ..training.objectives.language_model import score_heldout
from ..training.parallel.distributed import Context


def evaluate_grid(model: nn.Module, task: Task, lengths: list[int], depths: list[float], samples: int, seed: int, *,
                  window: int | None = None, batch_size: int = 16, context: Context = LOCAL,
                  autocast=contextlib.nullcontext()) -> dict:
    """Accuracy at each (length, depth); a task without depths gets one column of depth None.

    Tasks with several variants (the NIAH suite) are scored per variant with samples/len(variants)
    examples each; the cell is the mean over variants, as RULER averages its tasks.
    Returns {"window", "lengths", "depths", "accuracy": [[...] per depth], "variants": {name: grid}}.
    """
    depths = list(depths) if task.has_depth else [None]
    variants = getattr(task, "variants", None) or (None,)
    per_variant = {}
    with at_window(model, window):
        for variant in variants:
            sub = dataclasses.replace(task, variants=(variant,)) if variant else task
            per_variant[variant or task.name] = [
                [score_heldout(model, sub, length, math.ceil(samples / len(variants)), seed, depth=depth,
                          batch_size=batch_size, context=context, autocast=autocast)["accuracy"] for length in lengths]
                for depth in depths]
    grids = list(per_variant.values())
    mean = [[sum(g[i][j] for g in grids) / len(grids) for j in range(len(lengths))] for i in range(len(depths))]
    return {"window": window, "lengths": list(lengths), "depths": depths, "accuracy": mean, "variants": per_variant}


def format_table(grid: dict) -> str:
    """Rows: needle depth; columns: context length; cells: accuracy in percent."""
    head = ["depth \\ length"] + [str(length) for length in grid["lengths"]]
    rows = [[("-" if depth is None else f"{depth:.2f}")] + [f"{100 * a:.1f}" for a in accuracies]
            for depth, accuracies in zip(grid["depths"], grid["accuracy"])]
    means = [sum(column) / len(column) for column in zip(*grid["accuracy"])]
    rows.append(["mean"] + [f"{100 * a:.1f}" for a in means])
    widths = [max(len(row[i]) for row in [head] + rows) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in [head] + rows)
