"""Command-line options, each defined once: the runner's, which every benchmark takes, and the
groups that several benchmarks share (a benchmark sets its own defaults with parser.set_defaults)."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

# The input dtypes of the kernel benchmarks (--dtype).
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def positive_int(text: str) -> int:
    number = int(text)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def add_runner_arguments(parser: argparse.ArgumentParser) -> None:
    """--reps, --budget, --threads, --smoke, --out, --base, --passes and the memory probe's own flag."""
    parser.add_argument("--reps", type=positive_int, default=5, help="interleaved rounds (the fastest counts)")
    parser.add_argument("--budget", type=float, default=10.0,
                        help="a cell stops repeating once its runs add up to this many seconds")
    parser.add_argument("--threads", type=positive_int,
                        help="torch CPU threads (default: torch's choice); 1 steadies timings on a machine other "
                        "jobs share, where idle-waiting threads stall each other")
    parser.add_argument("--smoke", action="store_true",
                        help="tiny shapes and 2 rounds: checks that the benchmark runs, measures nothing")
    parser.add_argument("--out", type=Path, help="the JSON file to write (default: benchmarks/results/NAME.json; "
                        "with --smoke, benchmarks/results/smoke/NAME.json)")
    parser.add_argument("--base", metavar="REV",
                        help="A/B: also run this git revision (in a temporary worktree), alternating with this "
                        "tree, and report the per-cell ratio current / base")
    parser.add_argument("--passes", type=positive_int, default=3,
                        help="with --base: runs of each side, alternating; the best per cell counts")
    parser.add_argument("--probe-memory", metavar="LABELS", help=argparse.SUPPRESS)


def add_seq_lens(parser: argparse.ArgumentParser, default: list[int]) -> None:
    parser.add_argument("--seq-lens", type=positive_int, nargs="+", default=default, help="sequence lengths T")


def add_dtype(parser: argparse.ArgumentParser, default: str = "fp32", choices=tuple(DTYPES), help: str | None = None) -> None:
    parser.add_argument("--dtype", choices=choices, default=default, help=help or "input dtype")


def add_device(parser: argparse.ArgumentParser, default: str = "cpu") -> None:
    parser.add_argument("--device", default=default, help="cpu or cuda[:N]")


def add_chunkwise_shape(parser: argparse.ArgumentParser) -> None:
    """--batch, --heads, --key-dim, --value-dim and --chunk-size of a chunkwise linear recurrence:
    the same defaults for every such kernel, so their tables compare like with like."""
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=positive_int, default=4)
    parser.add_argument("--key-dim", type=positive_int, default=64)
    parser.add_argument("--value-dim", type=positive_int, default=128)
    parser.add_argument("--chunk-size", type=positive_int, default=64)


def add_reference_max_len(parser: argparse.ArgumentParser, default: int = 4096) -> None:
    parser.add_argument("--reference-max-len", type=positive_int, default=default,
                        help="skip the step loop (backend reference) above this T: T Python steps would dominate the run")


class ReplacingAppend(argparse.Action):
    """Appends each value, but the first one given replaces the default list rather than adding to it."""

    def __call__(self, parser, namespace, values, option_string=None):
        current = getattr(namespace, self.dest)
        setattr(namespace, self.dest, [*([] if current is self.default else current), values])


def add_spec(parser: argparse.ArgumentParser, default: str, overrides: tuple[str, ...] = ()) -> None:
    """--spec (a shipped name or a YAML path) and --set KEY=VALUE overrides (repeatable; any given
    replace the default ones)."""
    parser.add_argument("--spec", default=default, help="a spec: a shipped name or a path")
    parser.add_argument("--set", dest="overrides", action=ReplacingAppend, default=list(overrides), metavar="KEY=VALUE",
                        help=f"spec overrides (default: {' '.join(overrides) or 'none'})")


def add_memory_switch(parser: argparse.ArgumentParser, default: bool) -> None:
    """--memory (off by default) or --no-memory (on by default): the peak-memory probes."""
    if default:
        parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory probes")
    else:
        parser.add_argument("--memory", action="store_true",
                            help="also the peak memory of each probed cell (a fresh process each on CPU)")
