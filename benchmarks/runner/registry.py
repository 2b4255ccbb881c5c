"""What a benchmark is, and the registry of them by name.

Each benchmark is one module of this package, `benchmarks/<name>.py`, ending in
`BENCHMARK = Benchmark(...)`; NAMES lists them in the order the docs show them.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field

from .summary import SummaryRow

NAMES = ("swa", "mlstm", "gated_deltanet", "ssd_kda", "packed", "gpu_kernels", "varlen_training",
         "compiled_training", "text_data", "armt", "hf_decode", "real_model", "context", "vllm")


def _always_available(args: argparse.Namespace) -> None:
    return None


def _no_memory_cells(args: argparse.Namespace) -> list[dict]:
    return []


def _no_environment(args: argparse.Namespace) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class Benchmark:
    """name: its command (`python -m benchmarks NAME`) and results file; description: one line.

    add_arguments(parser) adds its options (sharing arguments.py's) and sets its defaults of the
    runner's (--reps, --budget, --threads). run(args) times it: {"rows": [...], and anything else
    its tables need}. render(results) is its Markdown tables from a results file; summary(results)
    its rows of the README's summary table. smoke: the options --smoke sets (tiny shapes).
    unavailable(args): why it cannot run here (no CUDA, a missing package), or None. packages:
    whose versions the results' context records. memory_cells(args): the labels of the cells whose
    peak memory is probed (one fresh process each on CPU), memory_probe(args, labels) the call to
    measure, warm-up done. environment(args): variables the process must start with (a run
    re-executes itself with them).
    """

    name: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], dict]
    render: Callable[[dict], str]
    summary: Callable[[dict], list[SummaryRow]] | None = None
    smoke: dict = field(default_factory=dict)
    unavailable: Callable[[argparse.Namespace], str | None] = _always_available
    packages: tuple[str, ...] = ()
    memory_cells: Callable[[argparse.Namespace], list[dict]] = _no_memory_cells
    memory_probe: Callable[[argparse.Namespace, dict], Callable[[], object]] | None = None
    environment: Callable[[argparse.Namespace], dict[str, str]] = _no_environment


def get(name: str) -> Benchmark:
    """The benchmark registered as `name` (its module imported on first use)."""
    if name not in NAMES:
        raise KeyError(f"no benchmark {name!r}; the benchmarks are: {', '.join(NAMES)}")
    return importlib.import_module(f"benchmarks.{name}").BENCHMARK


def all_benchmarks() -> list[Benchmark]:
    return [get(name) for name in NAMES]
