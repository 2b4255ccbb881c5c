"""How objectives read a task: the examples of a training step, the seeded held-out examples of a
measure, and a model's logits on a batch."""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Iterable, Iterator

import torch
from torch import nn

from ...tasks import Batch, Task, example_seed
from ..parallel.distributed import Context

LOCAL = Context(rank=0, world_size=1, device=torch.device("cpu"))


def local(device: torch.device | str) -> Context:
    """One process's context on `device`."""
    return dataclasses.replace(LOCAL, device=torch.device(device))

# Measures run a compiled model (training.compile) eagerly: under no_grad the compiled C++
# kernels do the work, so compiling gains little, and every measured length would compile anew.
uncompiled = torch.compiler.set_stance("force_eager")


def training_batch(task: Task, seq_len: int, seed: int, stream: str, step: int, indices: Iterable[int],
                   device: torch.device) -> Batch:
    """The examples `indices` of a step of the stream (training's "train", a distillation stage's
    name), drawn from (seed, stream, step, index), on `device`."""
    seeds = [example_seed(seed, stream, step, index) for index in indices]
    return task.batch(seq_len, seeds, pack=task.pack).to(device)


def forward_batch(model: nn.Module, batch: Batch, autocast=contextlib.nullcontext(), logits_to_keep: int = 0
                  ) -> torch.Tensor:
    """The model's logits on a batch, (B, T, vocab) fp32 ((B, K, vocab): the last K = logits_to_keep
    positions', for a CausalLM on unpacked rows): a batch of packed examples (cu_seqlens) runs as one
    packed row, so that no example sees another."""
    with autocast:
        if logits_to_keep:
            logits = model(batch.input_ids, logits_to_keep=logits_to_keep)
        elif batch.cu_seqlens is None:
            logits = model(batch.input_ids)
        else:
            logits = model(batch.input_ids.reshape(1, -1), cu_seqlens=batch.cu_seqlens).reshape(*batch.input_ids.shape, -1)
    return logits.float()


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


@contextlib.contextmanager
def evaluating(*models: nn.Module | None) -> Iterator[None]:
    """The models in eval mode inside the block, each back in its own mode after it."""
    models = [model for model in models if model is not None]
    modes = [model.training for model in models]
    for model in models:
        model.eval()
    try:
        yield
    finally:
        for model, mode in zip(models, modes):
            model.train(mode)
