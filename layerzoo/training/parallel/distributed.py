"""Data parallelism under torchrun: process group, device, DDP wrapping, reductions (FSDP2: fsdp.py).

Without torchrun's environment (WORLD_SIZE unset or 1) everything here is a no-op, so the same
trainer runs as one plain process.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn


@dataclass(frozen=True)
class Context:
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def launched_rank() -> int:
    """This process's rank as torchrun launched it (0 without torchrun), known before setup()."""
    return int(os.environ.get("RANK", "0"))


def setup() -> Context:
    """Join torchrun's process group (nccl on GPUs, gloo on CPU) and pick this rank's device."""
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    rank = launched_rank()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        device = torch.device("cuda", local_rank)
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    if world_size > 1 and not dist.is_initialized():
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    return Context(rank, world_size, device)


def teardown(context: Context) -> None:
    if context.distributed and dist.is_initialized():
        dist.destroy_process_group()


def barrier(context: Context) -> None:
    """Wait until every rank is here (a no-op in one process)."""
    if context.distributed:
        dist.barrier()


def wrap(model: nn.Module, context: Context, strategy: str, find_unused: bool = False) -> nn.Module:
    """DDP around `model` (replicated weights, averaged gradients). An FSDP2 model is sharded in
    place when built (fsdp.build_sharded) and comes back as it is; so does any model in one process.
    find_unused: some weights may get no gradient on some ranks (DDP then finds them each step)."""
    if not context.distributed or strategy == "fsdp":
        return model
    device_ids = [context.device.index] if context.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids, find_unused_parameters=find_unused)


@contextlib.contextmanager
def gradient_sync(model: nn.Module, enabled: bool):
    """Within this block, backward all-reduces gradients only if `enabled`.

    Gradient accumulation turns it off for every micro-batch but the last: the gradients add up
    locally and are averaged across ranks once per optimizer step, not once per micro-batch.
    A plain (single-process) model ignores it.
    """
    if enabled:
        yield
    elif isinstance(model, nn.parallel.DistributedDataParallel):
        with model.no_sync():
            yield
    elif hasattr(model, "set_requires_gradient_sync"):  # FSDP2
        model.set_requires_gradient_sync(False)
        try:
            yield
        finally:
            model.set_requires_gradient_sync(True)
    else:
        yield


def all_sum(values: list[float], context: Context, device: torch.device) -> list[float]:
    """Element-wise sums over ranks (token counts, loss sums) in float64."""
    if not context.distributed:
        return values
    tensor = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(tensor)
    return tensor.tolist()


def sum_gradients(model: nn.Module, context: Context) -> None:
    """Sum each parameter's gradient over the ranks, in place (a no-op in one process).

    For a model stepped without DDP or FSDP (distillation calls its mixers one by one): with the
    losses divided by the global batch's count, the sum is the one-process gradient. Every rank
    holds gradients for the same parameters, as every rank runs the same computation.
    """
    if not context.distributed:
        return
    for parameter in model.parameters():
        if parameter.grad is not None:
            dist.all_reduce(parameter.grad)
