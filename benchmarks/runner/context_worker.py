"""One cell of the context benchmark: K gloo processes (torchrun) run forward + backward of one
sequence, a contiguous piece each; rank 0 prints {"peak_bytes", "seconds"} as the last line.

peak_bytes: the largest rise of a rank's peak resident set over one step (memory.py), after a
short warm-up step that allocates the gradients and pays one-off costs; seconds: the best of
`reps` further steps, the group's slowest rank.

Usage: torchrun --nproc_per_node K -m benchmarks.runner.context_worker SPEC LENGTH REPS BALANCED [OVERRIDE ...]
(BALANCED: 1 balances full attention's work over the ranks, ContextGroup.balance_attention)
"""

from __future__ import annotations

import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

import layerzoo
from layerzoo.training.parallel.context import ContextGroup, Pieces, context_parallel

from .memory import rss_rise_bytes

WARM_UP_TOKENS = 64  # per rank: longer than every window and chunk of the benchmark's models


def step(model, group: ContextGroup, ids: torch.Tensor) -> None:
    """Forward and backward of ids (1, T), this rank's piece of it."""
    pieces = Pieces.split(group, ids.shape[1])
    with context_parallel(model, pieces):
        logits = model(pieces.slice(ids))
    F.cross_entropy(logits.flatten(0, 1), pieces.slice(ids.roll(-1, 1)).flatten()).backward()


def group_max(number: float) -> float:
    value = torch.tensor(float(number), dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


def main(spec: str, length: int, reps: int, balanced: bool, overrides: list[str]) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    group = ContextGroup.from_world(dist.get_world_size(), balanced)
    torch.manual_seed(0)
    model = layerzoo.build(spec, overrides)
    ids = torch.randint(model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))
    step(model, group, ids[:, :WARM_UP_TOKENS * group.size])
    peak = group_max(rss_rise_bytes(lambda: step(model, group, ids)))
    seconds = []
    for _ in range(reps):
        dist.barrier()
        start = time.perf_counter()
        step(model, group, ids)
        seconds.append(group_max(time.perf_counter() - start))
    if dist.get_rank() == 0:
        print(json.dumps({"peak_bytes": int(peak), "seconds": min(seconds)}))
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # gloo's threads can abort interpreter shutdown


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1", sys.argv[5:])
