"""A linear-recurrence kernel's backends against sequence length: the cells, the table, the summary.

Shared by the mLSTM, Gated DeltaNet and SSD/KDA benchmarks. Each backend is timed forward and
forward+backward at every T of --seq-lens (the step loop, backend "reference", only up to
--reference-max-len), all kernels' cells in one set of rounds. Cells are labelled {"kernel",
"seq_len", "method" (the backend or peer), "mode"}.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .arguments import DTYPES, add_chunkwise_shape, add_device, add_dtype, add_reference_max_len, add_seq_lens
from .kernel_modes import MODES, kernel_modes
from .results import value
from .summary import SummaryRow, against_best_peer
from .tables import markdown_table, ms, rate_of_matmul, ratio, scaling_exponent, share_of_matmul
from .timing import Cell, matmul_gflops, time_cells

# The T at which the tables give our kernel's speedups and the summary its row (else the sweep's largest T).
COMPARED_AT = 4096
# layerzoo's chunked backends, which the tables' GFLOP/s columns count; the first a run timed is
# ours in the speedups and the summary: the compiled one on CPU, else PyTorch's.
CHUNKED = ("native", "chunkwise")
# --smoke's shapes: two short T, a few chunks each.
SMOKE = {"seq_lens": [32, 64], "heads": 2, "key_dim": 16, "value_dim": 16, "chunk_size": 16}


@dataclass(frozen=True)
class Kernel:
    """One kernel swept over T.

    inputs(args, seq_len, method) -> (the call's inputs, a gradient shaped as its output);
    call(args, method) -> fn(*inputs) -> output; flops(args, seq_len): the forward's matmul
    flops as the chunkwise kernel executes them, for its GFLOP/s (None: not counted).
    """

    name: str
    inputs: Callable[[argparse.Namespace, int, str], tuple[list[torch.Tensor], torch.Tensor]]
    call: Callable[[argparse.Namespace, str], Callable[..., torch.Tensor]]
    flops: Callable[[argparse.Namespace, int], float] | None = None


def add_sweep_arguments(parser: argparse.ArgumentParser, seq_lens: list[int], dtypes=tuple(DTYPES),
                        dtype_help: str | None = None) -> None:
    """--seq-lens (default seq_lens), the chunkwise shape, --dtype, --device, --reference-max-len."""
    add_seq_lens(parser, seq_lens)
    add_chunkwise_shape(parser)
    add_dtype(parser, choices=dtypes, help=dtype_help)
    add_device(parser)
    add_reference_max_len(parser)


def modes(args: argparse.Namespace, kernel: Kernel, method: str, seq_len: int) -> dict:
    inputs, grad_out = kernel.inputs(args, seq_len, method)
    return kernel_modes(kernel.call(args, method), inputs, grad_out)


def sweep_cells(args: argparse.Namespace, kernels: list[Kernel], methods: list[str]) -> tuple[list[Cell], list]:
    """The cells of every kernel, T, method and mode, and warm-ups (every method once at T = the
    chunk size: thread pools, lazily loaded kernels)."""
    cells, warmups = [], []
    for kernel in kernels:
        for seq_len in args.seq_lens:
            for method in methods:
                if method == "reference" and seq_len > args.reference_max_len:
                    continue
                for mode, fn in modes(args, kernel, method, seq_len).items():
                    cells.append(Cell({"kernel": kernel.name, "seq_len": seq_len, "method": method, "mode": mode}, fn))
        for method in methods:
            warmups += modes(args, kernel, method, args.chunk_size).values()
    return cells, warmups


def run_sweep(args: argparse.Namespace, kernels: list[Kernel], methods: list[str]) -> dict:
    """The results rows of every kernel's cells, timed in one set of interleaved rounds."""
    cells, warmups = sweep_cells(args, kernels, methods)
    return {"rows": time_cells(cells, rounds=args.reps, budget=args.budget, device=args.device, warmups=warmups)}


def compared_at(seq_lens: list[int]) -> int:
    return COMPARED_AT if COMPARED_AT in seq_lens else max(seq_lens)


def methods_of(rows: list[dict], kernel: Kernel) -> list[str]:
    """The methods a run timed for kernel, in the order it timed them."""
    return list(dict.fromkeys(row["cell"]["method"] for row in rows if row["cell"].get("kernel") == kernel.name))


def ours(methods: list[str]) -> str:
    """Our kernel among the methods a run timed: the first of CHUNKED."""
    return next(method for method in CHUNKED if method in methods)


def kernel_table(data: dict, kernel: Kernel) -> str:
    """A row per T: each method's best forward and forward+backward ms ("skipped" where not run),
    the chunked backends' forward GFLOP/s and share of the matmul rate; then our kernel's
    speedups over the others at one T and how its time grows with T."""
    rows, args = data["rows"], argparse.Namespace(**data["config"])
    seq_lens, gflops, methods = args.seq_lens, matmul_gflops(rows), methods_of(rows, kernel)
    us = ours(methods)

    def seconds(seq_len, method, mode):
        return value(rows, "seconds", kernel=kernel.name, seq_len=seq_len, method=method, mode=mode)

    counted = [m for m in CHUNKED if m in methods] if kernel.flops else []
    head = ["T"] + [f"{m} {label} ms" for m in methods for label in ("fwd", "fwd+bwd")]
    head += [f"{m} fwd GFLOP/s (of matmul)" for m in counted]
    table = []
    for seq_len in seq_lens:
        cells = [str(seq_len)]
        cells += [ms(s) if (s := seconds(seq_len, m, mode)) is not None else "skipped" for m in methods for mode in MODES]
        cells += [rate_of_matmul(kernel.flops(args, seq_len), seconds(seq_len, m, "forward"), gflops) for m in counted]
        table.append(cells)
    lines = [markdown_table(head, table), ""]
    at = compared_at(seq_lens)
    for method in methods:
        if method != us and seconds(at, method, "forward") is not None:
            lines.append(f"- {us} / {method} speedup at T = {at}: forward "
                         f"{ratio(seconds(at, method, 'forward'), seconds(at, us, 'forward'))}, forward+backward "
                         f"{ratio(seconds(at, method, 'forward_backward'), seconds(at, us, 'forward_backward'))}")
    exponents = [scaling_exponent(seq_lens, [seconds(t, us, mode) for t in seq_lens]) for mode in MODES]
    if None not in exponents:
        lines.append(f"- {us} time ~ T^p: p = {exponents[0]:.2f} forward, {exponents[1]:.2f} forward+backward "
                     "(1 is linear)")
    skipped = [t for t in seq_lens if "reference" in methods and seconds(t, "reference", "forward") is None]
    if skipped:
        lines.append(f"- reference skipped at T = {', '.join(map(str, skipped))} (above --reference-max-len)")
    return "\n".join(lines)


def render_sweep(data: dict, kernels: list[Kernel], shape: str, note: str = "") -> str:
    """A caption (the shape, chunk, dtype, device, rounds and `note`), then each kernel's table."""
    config = data["config"]
    parts = [f"{shape}, chunk {config['chunk_size']}, {config['dtype']}, {config['device']}, best of {config['reps']} "
             f"interleaved rounds{note}"]
    for kernel in kernels:
        parts += ([f"**{kernel.name}**"] if len(kernels) > 1 else []) + [kernel_table(data, kernel)]
    return "\n\n".join(parts)


def summary_rows(data: dict, kernel: Kernel, label: str, shape: str, peers: dict[str, str]) -> list[SummaryRow]:
    """The README's rows of one kernel: ours against the fastest of `peers` ({method: its
    description}) at one T, forward and forward+backward."""
    rows, args = data["rows"], argparse.Namespace(**data["config"])
    at = compared_at(args.seq_lens)
    gflops, us = matmul_gflops(rows), ours(methods_of(rows, kernel))
    result = []
    for mode, mode_label in zip(MODES, ("forward", "forward+backward")):
        def seconds(method):
            return value(rows, "seconds", kernel=kernel.name, seq_len=at, method=method, mode=mode)

        mine = seconds(us)
        share = share_of_matmul(kernel.flops(args, at), mine, gflops) if mine and mode == "forward" and kernel.flops else ""
        result += against_best_peer(f"{label} {mode_label}", f"{shape}, T {at}", mine,
                                    {name: seconds(method) for method, name in peers.items()}, share)
    return result
