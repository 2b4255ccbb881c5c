"""Scoring a model on a task: loss and accuracy on the scored tokens, alone or over a
context-length x needle-depth grid (the NIAH heatmap), at any test window."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from ...mixers import at_window
from ...tasks import IGNORE, Batch, Task, example_seed
from ..parallel.distributed import Context, all_sum

LOCAL = Context(rank=0, world_size=1, device=torch.device("cpu"))


def local(device: torch.device | str) -> Context:
    """One process's context on `device`."""
    return dataclasses.replace(LOCAL, device=torch.device(device))

# Evaluation runs a compiled model (training.compile) eagerly: under no_grad the compiled C++
# kernels do the work, so compiling gains little, and every evaluated length would compile anew.
uncompiled = torch.compiler.set_stance("force_eager")


def forward_batch(model: nn.Module, batch: Batch, autocast=contextlib.nullcontext()) -> torch.Tensor:
    """The model's logits on a batch, (B, T, vocab) fp32: a batch of packed examples (cu_seqlens)
    runs as one packed row, so that no example sees another."""
    with autocast:
        if batch.cu_seqlens is None:
            logits = model(batch.input_ids)
        else:
            logits = model(batch.input_ids.reshape(1, -1), cu_seqlens=batch.cu_seqlens).reshape(*batch.input_ids.shape, -1)
    return logits.float()


def score(model: nn.Module, batch: Batch, autocast: contextlib.AbstractContextManager) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(summed cross-entropy (0-d, differentiable), correct argmax predictions (0-d), scored tokens)
    over the positions of batch.targets that are not IGNORE."""
    logits = forward_batch(model, batch, autocast)
    targets = batch.targets
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum")
    correct = ((logits.argmax(-1) == targets) & (targets != IGNORE)).sum()
    return loss, correct, batch.scored


@torch.no_grad()
@uncompiled
def evaluate(model: nn.Module, task: Task, seq_len: int, samples: int, seed: int, *, depth: float | None = None,
             batch_size: int = 16, context: Context = LOCAL, autocast=contextlib.nullcontext()) -> dict[str, float]:
    """Mean loss and accuracy over the scored tokens of `samples` seeded examples (the same ones
    every call), the samples split over data-parallel ranks."""
    was_training = model.training
    model.eval()
    loss = correct = count = 0.0
    for batch, counts in heldout_batches(task, seq_len, samples, seed, depth=depth, batch_size=batch_size, context=context):
        batch_loss, batch_correct, batch_count = score(model, batch, autocast)
        if counts:
            loss, correct, count = loss + batch_loss.item(), correct + batch_correct.item(), count + batch_count
    loss, correct, count = all_sum([loss, correct, count], context, context.device)
    model.train(was_training)
    return {"loss": loss / max(count, 1), "accuracy": correct / max(count, 1)}


def heldout_batches(task: Task, seq_len: int, samples: int, seed: int, *, depth: float | None = None,
                    batch_size: int = 16, context: Context = LOCAL) -> Iterator[tuple[Batch, bool]]:
    """The batches of `samples` seeded held-out examples (the same ones every call) that this rank
    scores, on its device, each with whether its results count.

    Every rank runs as many batches as the busiest: an FSDP forward gathers weights from all
    ranks, so one that stopped early would leave the others waiting. A rank out of examples
    scores example 0, and its results do not count.
    """
    mine = list(range(samples))[context.rank::context.world_size]
    batches = math.ceil(math.ceil(samples / context.world_size) / batch_size)
    for start in range(0, batches * batch_size, batch_size):
        indices = mine[start:start + batch_size]
        seeds = [example_seed(seed, "eval", seq_len, depth, index) for index in indices or [0]]
        yield task.batch(seq_len, seeds, depth=depth).to(context.device), bool(indices)


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
                [evaluate(model, sub, length, math.ceil(samples / len(variants)), seed, depth=depth,
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
