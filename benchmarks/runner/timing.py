"""The one timing harness: every cell of a benchmark in interleaved rounds, the best of them kept.

A cell is one thing timed: a method or peer at one shape in one mode, labelled by a dict such as
{"method": "chunkwise", "seq_len": 4096, "mode": "forward"}. Each round runs every cell once, so a
busy spell of a shared machine slows all cells alike rather than bending one row; the best run
counts, not the median, since slow runs measure the neighbours. A (2048, 2048) fp32 matmul (4096
on CUDA) is a cell of the same rounds: the machine's reference rate, against which a kernel's
rate can be read.
"""

from __future__ import annotations

import gc
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import torch

MATMUL = "fp32 matmul"


@dataclass(frozen=True)
class Cell:
    """labels name the cell in the results; run() is the timed call (its inputs made beforehand)."""

    labels: dict
    run: Callable[[], object]


def sync(device: str) -> None:
    """Wait for queued GPU work, so a wall-clock interval covers the kernels, not just their launch."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def matmul_cell(device: str) -> Cell:
    """A (size, size) fp32 matmul: 2 size^3 flops (matmul_gflops reads them back from the labels)."""
    size = 4096 if device.startswith("cuda") else 2048
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    return Cell({"method": MATMUL, "size": size}, lambda: a @ b)


def matmul_gflops(rows: Sequence[dict]) -> float | None:
    """The reference rate of a run's results rows, in GFLOP/s; None where it was not timed."""
    for row in rows:
        if row["cell"].get("method") == MATMUL:
            return 2 * row["cell"]["size"] ** 3 / row["seconds"] / 1e9
    return None


def time_cells(cells: Sequence[Cell], *, rounds: int, budget: float | None, device: str = "cpu",
               warmups: Iterable[Callable[[], object]] = ()) -> list[dict]:
    """Results rows {"cell": labels, "seconds": best} of the matmul reference and every cell.

    warmups run once, untimed, before the rounds: what loads or compiles on first use (thread
    pools, compiled kernels, torch.compile's graphs at each shape). Cells are not warmed up one by
    one unless listed, since that would double the time of a sweep's slowest cells and the best of
    the rounds leaves a slow first run out anyway. A cell stops repeating once its runs add up to
    `budget` seconds (None: never); it always runs once.

    Python's cyclic garbage collector is off while a cell runs, as timeit has it: a step loop makes
    a few tensors per step while holding O(T) of them, so collections would cost it time that grows
    faster than T, measuring the collector rather than the kernel. It collects between rounds.
    """
    cells = [matmul_cell(device), *cells]
    for warmup in [cells[0].run, *warmups]:
        warmup()
        sync(device)
    times: list[list[float]] = [[] for _ in cells]
    for round_index in range(rounds):
        for cell, runs in zip(cells, times):
            if runs and budget is not None and sum(runs) >= budget:
                continue
            gc.disable()
            try:
                start = time.perf_counter()
                cell.run()
                sync(device)
                runs.append(time.perf_counter() - start)
            finally:
                gc.enable()
        gc.collect()
        print(f"round {round_index + 1}/{rounds} done", file=sys.stderr, flush=True)
    return [{"cell": dict(cell.labels), "seconds": min(runs)} for cell, runs in zip(cells, times)]


def first_call_seconds(fn: Callable[[], object], device: str = "cpu") -> float:
    """Seconds of one call: the one-time cost (a build, a compile) that a run pays before the rounds."""
    start = time.perf_counter()
    fn()
    sync(device)
    return time.perf_counter() - start
