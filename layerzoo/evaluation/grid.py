"""NIAH's accuracy grid: a model scored at each context length x needle depth, at a test window,
and its table."""

from __future__ import annotations

import contextlib
import dataclasses
import math

from torch import nn

from ..assemblies.causal_lm import CausalLM
from ..mixers import at_window
from ..tasks import Task
from ..training.objectives.batches import LOCAL
from ..training.objectives.language_model import score_heldout
from ..training.parallel.distributed import Context
from .progress import Progress


def evaluate_grid(model: nn.Module, task: Task, lengths: list[int], depths: list[float], samples: int, seed: int, *,
                  window: int | None = None, batch_size: int = 16, context: Context = LOCAL,
                  autocast=contextlib.nullcontext(), label: str = "grid", progress: bool = False) -> dict:
    """Accuracy at each (length, depth); a task without depths gets one column of depth None.

    Tasks with several variants (the NIAH suite) are scored per variant with samples/len(variants)
    examples each; the cell is the mean over variants, as RULER averages its tasks. `progress`: a
    bar of the tokens run (stderr, named `label`) and the grid's time after its first cell.
    Returns {"window", "lengths", "depths", "accuracy": [[...] per depth], "variants": {name: grid}}.
    """
    depths = list(depths) if task.has_depth else [None]
    variants = getattr(task, "variants", None) or (None,)
    per_cell = math.ceil(samples / len(variants))
    tasks = {variant or task.name: dataclasses.replace(task, variants=(variant,)) if variant else task
             for variant in variants}
    # a CausalLM's head runs on the scored tail only (NIAH scores its query, at the end); ARMT's segments need all
    scored_tail = isinstance(model, CausalLM)
    total = len(tasks) * len(depths) * sum(lengths) * per_cell
    per_variant = {name: [[0.0] * len(lengths) for _ in depths] for name in tasks}
    with at_window(model, window), Progress(total, label, "the grid", enabled=progress and context.is_main) as bar:
        for name, sub in tasks.items():
            for i, depth in enumerate(depths):
                for j, length in enumerate(lengths):
                    per_variant[name][i][j] = score_heldout(
                        model, sub, length, per_cell, seed, depth=depth, batch_size=batch_size, context=context,
                        autocast=autocast, scored_tail=scored_tail)["accuracy"]
                    bar.advance(length * per_cell)
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
