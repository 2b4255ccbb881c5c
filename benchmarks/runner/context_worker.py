"""One cell of the context benchmark: K gloo processes (torchrun) run forward + backward of one
sequence, a contiguous piece each; rank 0 prints {"peak_bytes", "seconds"} as the last line.

peak_bytes: the largest rise of a rank's peak resident set over one step (memory.py), after a
short warm-up step that allocates the gradients and pays one-off costs; seconds: the best of
`reps` further steps, the group's slowest rank.

Usage: torchrun --nproc_per_node K -m benchmarks.runner.context_worker SPEC LENGTH REPS BALANCED DOCUMENTS [OVERRIDE ...]
(BALANCED: 1 balances full attention's work over the ranks where it is uneven, ContextGroup.balance_attention;
DOCUMENTS: "-" for one sequence, or relative lengths "5,1" of sequences packed in the row)
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


def packed_offsets(length: int, documents: list[int] | None) -> torch.Tensor | None:
    """cu_seqlens of sequences of relative lengths `documents` filling `length` tokens (None: one sequence)."""
    if documents is None:
        return None
    cuts = [length * sum(documents[:n]) // sum(documents) for n in range(len(documents) + 1)]
    return torch.tensor(cuts)


def step(model, group: ContextGroup, ids: torch.Tensor, documents: list[int] | None) -> None:
    """Forward and backward of ids (1, T), this rank's piece of it."""
    pieces = Pieces.split(group, ids.shape[1], packed_offsets(ids.shape[1], documents))
    with context_parallel(model, pieces):
        logits = model(pieces.slice(ids), cu_seqlens=pieces.local_cu_seqlens())
    F.cross_entropy(logits.flatten(0, 1), pieces.slice(ids.roll(-1, 1)).flatten()).backward()


def group_max(number: float) -> float:
    value = torch.tensor(float(number), dtype=torch.float64)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return value.item()


def main(spec: str, length: int, reps: int, balanced: bool, documents: list[int] | None, overrides: list[str]) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    group = ContextGroup.from_world(dist.get_world_size(), balanced)
    torch.manual_seed(0)
    model = layerzoo.build(spec, overrides)
    ids = torch.randint(model.config.vocab_size, (1, length), generator=torch.Generator().manual_seed(0))
    step(model, group, ids[:, :WARM_UP_TOKENS * group.size], documents)
    peak = group_max(rss_rise_bytes(lambda: step(model, group, ids, documents)))
    seconds = []
    for _ in range(reps):
        dist.barrier()
        start = time.perf_counter()
        step(model, group, ids, documents)
        seconds.append(group_max(time.perf_counter() - start))
    if dist.get_rank() == 0:
        print(json.dumps({"peak_bytes": int(peak), "seconds": min(seconds)}))
    dist.destroy_process_group()
    sys.stdout.flush()
    os._exit(0)  # gloo's threads can abort interpreter shutdown


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1",
         None if sys.argv[5] == "-" else [int(n) for n in sys.argv[5].split(",")], sys.argv[6:])
