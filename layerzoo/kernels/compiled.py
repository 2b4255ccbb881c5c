"""Every compiled CPU kernel of layerzoo, each its family's "native" backend: which are built in
this Python environment, and building them all up front (`layerzoo kernels`, `layerzoo kernels
build`) rather than on first use."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable

from .common.native_build import CompiledOps
from .gated_delta_rule.native import COMPILED as GATED_DELTA_RULE
from .kda.native import COMPILED as KDA
from .mlstm.native import COMPILED as MLSTM
from .sliding_window.native import COMPILED as SLIDING_WINDOW
from .ssd.native import COMPILED as SSD

KERNELS: tuple[CompiledOps, ...] = (SLIDING_WINDOW, GATED_DELTA_RULE, MLSTM, SSD, KDA)
# The public function whose backend="native" each of KERNELS is, in their order.
FUNCTIONS = ("sliding_window_attention", "gated_delta_rule", "mlstm", "ssd", "kda")


def table() -> list[tuple[str, str, str, str]]:
    """The rows `layerzoo kernels` lists, a header first: (function, backend, built, folder), one
    row per compiled kernel, named as a call forces it: `function(..., backend="native")`."""
    rows = [("function", "backend", "built", "folder")]
    rows += [(function, "native", "yes" if kernel.built() else "no", str(kernel.build_directory()))
             for function, kernel in zip(FUNCTIONS, KERNELS)]
    return rows


@dataclass(frozen=True)
class Built:
    """How building one kernel went: `was_built` (it was there already), `ok` (it loads), `seconds`."""

    kernel: CompiledOps
    was_built: bool
    ok: bool
    seconds: float


def build_all(kernels: tuple[CompiledOps, ...], jobs: int | None = None,
              done: Callable[[Built], None] = lambda built: None) -> list[Built]:
    """Build (where need be) and load `kernels` (KERNELS: all of them), `jobs` at a time (default:
    builds_at_once); `done(result)` hears of each as it finishes. A build is compiler processes
    that the thread starting it waits on, so threads run builds side by side. A kernel that cannot
    be built warns once (see native_build) and comes back not ok."""
    jobs = jobs or builds_at_once(kernels)

    def build(kernel: CompiledOps) -> Built:
        was_built, start = kernel.built(), time.perf_counter()
        return Built(kernel, was_built, kernel.load() is not None, time.perf_counter() - start)

    results = []
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in as_completed([pool.submit(build, kernel) for kernel in kernels]):
            results.append(future.result())
            done(results[-1])
    return results


def builds_at_once(kernels: tuple[CompiledOps, ...]) -> int:
    """One build per CPU this process may run on, at most one per kernel still to build, at least one."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return max(1, min(cpus, sum(not kernel.built() for kernel in kernels)))
