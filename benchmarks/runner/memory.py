"""Peak memory of one call: the rise of the resident set's peak on CPU, of torch's allocator peak on CUDA.

On CPU each measurement runs in a fresh process (`python -m benchmarks NAME ... --probe-memory
LABELS`), since memory that an earlier run freed stays mapped by the allocator and would hide
this run's needs; torch's CPU allocations are invisible to tracemalloc, so the kernel's own
accounting is read. On CUDA torch.cuda.max_memory_allocated says it in-process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import torch

# Linux lets a process reset its peak resident set (VmHWM) by writing "5" here; without it the
# peak would include everything the process ever touched before the measured run.
CLEAR_REFS = Path("/proc/self/clear_refs")
ROOT = Path(__file__).resolve().parents[2]


def can_measure(device: str) -> bool:
    """Whether peaks can be read here: CUDA, or Linux's /proc/self/clear_refs on CPU."""
    return device.startswith("cuda") or CLEAR_REFS.exists()


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(f"{field} not in /proc/self/status")


def rss_rise_bytes(fn: Callable[[], object]) -> int:
    """Bytes by which running fn raises this process's peak resident set (Linux only, see CLEAR_REFS)."""
    CLEAR_REFS.write_text("5")  # reset the peak (VmHWM) to the current RSS
    before = _status_kib("VmRSS")
    fn()
    return (_status_kib("VmHWM") - before) * 1024


def cuda_peak_rise_bytes(fn: Callable[[], object]) -> int:
    """Bytes by which running fn raises torch's CUDA allocator peak over what was allocated before."""
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before


def probe_in_subprocess(name: str, argv: list[str], labels: dict) -> int:
    """Run benchmark `name` with this run's options `argv` in a fresh process that measures the
    cell `labels` alone (the benchmark's memory_probe) and prints the bytes; returns them."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "benchmarks", name, *argv, "--probe-memory", json.dumps(labels)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"memory probe {labels} failed:\n{done.stderr[-2000:]}")
    return int(done.stdout.split()[-1])
