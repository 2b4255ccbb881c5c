"""Helpers shared by the scripts in benchmarks/: timing, the matmul reference rate, the scaling fit,
the peak-memory probe and markdown tables.

The scripts import this as `from common import ...`, which works because running
`python benchmarks/x.py` puts the script's own folder first on sys.path.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

# Linux lets a process reset its peak resident set (VmHWM) by writing "5" here; without it the
# peak would include everything the process ever touched before the measured run.
CLEAR_REFS = Path("/proc/self/clear_refs")


def sweep_parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser described by doc's first paragraph, with the --seq-lens sweep.

    The kernel benchmarks sweep the same sequence lengths by default, so their tables line up.
    """
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    return parser


def add_chunkwise_shape_arguments(parser: argparse.ArgumentParser) -> None:
    """--batch, --heads, --key-dim, --value-dim and --chunk-size of a chunkwise linear-recurrence kernel.

    The same defaults for every such kernel, so their benchmarks compare like with like.
    """
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--key-dim", type=int, default=64)
    parser.add_argument("--value-dim", type=int, default=128)
    parser.add_argument("--chunk-size", type=int, default=64)


# The input dtypes the kernel benchmarks take (--dtype).
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def add_step_loop_sweep_arguments(parser: argparse.ArgumentParser) -> None:
    """--dtype, --device, --threads, --reference-max-len, --reps, --budget and --json of a sweep
    that times a kernel's backends against its step loop in interleaved rounds."""
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, help="torch CPU threads (default: torch's choice); 1 steadies "
                        "timings on a machine other jobs share, where idle-waiting threads stall each other")
    parser.add_argument("--reference-max-len", type=int, default=4096, help="skip the step loop above this T")
    parser.add_argument("--reps", type=int, default=5, help="rounds of timed runs (the fastest counts)")
    parser.add_argument("--budget", type=float, default=10.0, help="a cell stops repeating after this many seconds")
    parser.add_argument("--json", type=Path, help="also write the results here")


def sync(device: str) -> None:
    """Wait for queued GPU work, so a wall-clock interval covers the kernels, not just their launch."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def timed_runs(fn: Callable[[], object], device: str, *, reps: int, budget: float, warmup: int,
               min_runs: int = 3) -> list[float]:
    """Seconds of each of up to `reps` runs of fn after `warmup` untimed ones.

    Stops early once `min_runs` runs are in and they add up to `budget` seconds, so the slow cells
    of a sweep do not take minutes each. The caller reduces the list (median, or min where noise
    from a shared machine only ever adds time).
    """
    for _ in range(warmup):
        fn()
        sync(device)
    times = []
    while len(times) < reps and (len(times) < min_runs or sum(times) < budget):
        start = time.perf_counter()
        fn()
        sync(device)
        times.append(time.perf_counter() - start)
    return times


def interleaved_best_seconds(cells: dict, reps: int, budget: float, device: str) -> dict:
    """{key: fn} -> {key: best seconds}, over up to `reps` rounds that run every cell once each.

    Rounds interleave the cells, so a busy spell of a shared machine slows all alike rather than
    bending one row; the best run, not the median, since slow runs measure the neighbours. A
    cell stops repeating once its runs add up to `budget` seconds (it always runs once).

    Python's cyclic garbage collector is off while a cell runs, as timeit has it: a step loop
    makes a few tensors per step while holding O(T) of them, so collections would cost it time
    that grows faster than T (+35% at T = 4096 in the Gated DeltaNet step loop), measuring the
    collector rather than the kernel. It collects between rounds instead.
    """
    times = {key: [] for key in cells}
    for round_index in range(reps):
        for key, fn in cells.items():
            if times[key] and sum(times[key]) >= budget:
                continue
            gc.disable()
            try:
                start = time.perf_counter()
                fn()
                sync(device)
                times[key].append(time.perf_counter() - start)
            finally:
                gc.enable()
        gc.collect()
        print(f"round {round_index + 1}/{reps} done", file=sys.stderr, flush=True)
    return {key: min(runs) for key, runs in times.items()}


def sweep_best_times(args, backends: list[str], runners: Callable, matmul_size: int = 2048) -> tuple[dict, float]:
    """Best forward and forward+backward seconds of each backend at each of args.seq_lens, and the
    fp32 matmul GFLOP/s, all timed as cells of the same interleaved rounds.

    runners(args, backend, seq_len) -> {"forward": fn, "forward_backward": fn}. The step loop
    ("reference") is skipped above args.reference_max_len. Returns ({(seq_len, backend):
    {"forward_s": s, "forward_backward_s": s} or None}, GFLOP/s).
    """
    matmul_fn, matmul_flops = matmul(args.device, matmul_size)
    cells = {"matmul": matmul_fn}
    for seq_len in args.seq_lens:
        for backend in backends:
            if backend != "reference" or seq_len <= args.reference_max_len:
                for mode, fn in runners(args, backend, seq_len).items():
                    cells[seq_len, backend, mode] = fn
    for fn in [matmul_fn] + [fn for backend in backends for fn in runners(args, backend, args.chunk_size).values()]:
        fn()  # warm-up: thread pools, lazily loaded kernels
    best = interleaved_best_seconds(cells, args.reps, args.budget, args.device)
    times = {
        (seq_len, backend): {f"{mode}_s": best[seq_len, backend, mode] for mode in ("forward", "forward_backward")}
        if (seq_len, backend, "forward") in best else None
        for seq_len in args.seq_lens for backend in backends
    }
    return times, matmul_flops / best["matmul"] / 1e9


def matmul(device: str, size: int = 2048) -> tuple[Callable[[], torch.Tensor], int]:
    """A (size, size) fp32 torch.matmul, the machine's reference rate, and its FLOPs."""
    a, b = (torch.randn(size, size, device=device) for _ in range(2))
    return lambda: a @ b, 2 * size**3


def scaling_exponent(sizes: list[float], times: list[float]) -> float | None:
    """Least-squares slope of log(time) against log(size): 1.0 is linear; None under two points."""
    if len(sizes) < 2:
        return None
    points = [(math.log(x), math.log(y)) for x, y in zip(sizes, times)]
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/self/status")


def rss_rise_bytes(fn: Callable[[], object]) -> int:
    """Bytes by which running fn raises this process's peak resident set (Linux only, see CLEAR_REFS).

    Torch's CPU allocations are invisible to tracemalloc, so the kernel's own accounting is used.
    """
    CLEAR_REFS.write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def probe_in_subprocess(script: str, *probe_args: object) -> int:
    """Re-run `script` with this run's flags plus `--probe-memory *probe_args`; its last printed int.

    A fresh process per measurement: memory an earlier run freed stays mapped by the allocator and
    would hide this run's needs.
    """
    cmd = [sys.executable, script, *sys.argv[1:], "--probe-memory", *map(str, probe_args)]
    return int(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()[-1])


def write_json(args: argparse.Namespace, **results: object) -> None:
    """When --json names a file, write the run's options (but that one), torch's version and results to it."""
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "json"}
        args.json.write_text(json.dumps({"config": config, "torch": torch.__version__, **results}, indent=2, default=str))


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A markdown table with every column right-aligned (they hold numbers)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)
