"""One benchmark run: its options parsed, its cells timed, its peaks probed, its JSON written."""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch

from .against_base import run_against_base
from .arguments import add_runner_arguments
from .context import run_context
from .memory import cuda_peak_rise_bytes, probe_in_subprocess, rss_rise_bytes
from .registry import Benchmark
from .render import render_results
from .results import default_path, find_row, write_json

# What --smoke sets for every benchmark, before the benchmark's own tiny shapes: two rounds, a
# cell that took half a second (an interpreted Triton kernel) runs once, and one thread, which a
# busy machine cannot stall.
SMOKE_DEFAULTS = {"reps": 2, "budget": 0.5, "threads": 1}
# Options that say where and how to run, not what a result measured: left out of its configuration.
NOT_CONFIGURATION = ("out", "base", "passes", "probe_memory")


def parser_for(benchmark: Benchmark) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=f"python -m benchmarks {benchmark.name}", description=benchmark.description,
                                     allow_abbrev=False)  # so that --base's sub-runs can strip its options by name
    add_runner_arguments(parser)
    benchmark.add_arguments(parser)
    return parser


def parse(benchmark: Benchmark, argv: list[str]) -> argparse.Namespace:
    """The options of argv; --smoke makes the tiny shapes the defaults, so options given still win."""
    parser = parser_for(benchmark)
    if parser.parse_args(argv).smoke:
        parser.set_defaults(**{**SMOKE_DEFAULTS, **benchmark.smoke})
    return parser.parse_args(argv)


def device_of(args: argparse.Namespace) -> str:
    return getattr(args, "device", "cpu")


def configuration(args: argparse.Namespace) -> dict:
    return {key: value for key, value in vars(args).items() if key not in NOT_CONFIGURATION}


def peak_bytes(benchmark: Benchmark, args: argparse.Namespace, argv: list[str], labels: dict) -> int:
    """The peak memory of one cell: in this process on CUDA, in a fresh one on CPU."""
    if device_of(args).startswith("cuda"):
        return cuda_peak_rise_bytes(benchmark.memory_probe(args, labels))
    return probe_in_subprocess(benchmark.name, argv, labels)


def measure(benchmark: Benchmark, args: argparse.Namespace, argv: list[str]) -> dict:
    """The results file's content: name, configuration, context, and the benchmark's rows with the
    probed cells' peak_bytes added."""
    context = run_context(device_of(args), benchmark.packages)
    results = benchmark.run(args)
    rows = results["rows"]
    for labels in benchmark.memory_cells(args):
        row = find_row(rows, **labels)
        if row is None:
            row = {"cell": labels}
            rows.append(row)
        row["peak_bytes"] = peak_bytes(benchmark, args, argv, labels)
    return {"benchmark": benchmark.name, "description": benchmark.description, "config": configuration(args),
            "context": context, **results}


def reexecute_with(environment: dict[str, str], argv: list[str], name: str) -> None:
    """Replace this process by the same run started with `environment` set, unless it already is."""
    if any(os.environ.get(key) != value for key, value in environment.items()):
        os.execve(sys.executable, [sys.executable, "-m", "benchmarks", name, *argv], {**os.environ, **environment})


def run_benchmark(benchmark: Benchmark, argv: list[str], *, reexecute: bool = False) -> int:
    """`python -m benchmarks NAME *argv`: the exit status. reexecute: start afresh when the benchmark
    needs its process started with variables set (an in-process caller, a test, runs without them)."""
    args = parse(benchmark, argv)
    if args.base:
        return run_against_base(benchmark, args, argv)
    why_not = benchmark.unavailable(args)
    if why_not:
        print(f"{benchmark.name}: {why_not}", file=sys.stderr)
        return 1
    if reexecute:
        reexecute_with(benchmark.environment(args), argv, benchmark.name)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.probe_memory:
        print(rss_rise_bytes(benchmark.memory_probe(args, json.loads(args.probe_memory))))
        return 0
    data = measure(benchmark, args, argv)
    path = args.out or default_path(benchmark.name, args.smoke)
    write_json(path, data)
    print(render_results(data))
    print(f"wrote {path}", file=sys.stderr)
    return 0
