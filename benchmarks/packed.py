"""Packed sequences (cu_seqlens) against padding to the longest, per kernel, on CPU.

    python -m benchmarks packed                      # T = 4096, fp32, seeds 0 1 2
    python -m benchmarks packed --threads 1 --median-fraction 128

A row of T tokens holds documents of log-normal lengths (median T / 8, or --median-fraction;
sigma 1; the last one cut to fit), as a packed training batch does. Each kernel (its CPU default
backend: SWA window 128, H=8, D=64; mLSTM and the gated delta rule H=4, K=64, V=128) runs it four
ways, forward and forward+backward, all cells of all seeds in one set of interleaved rounds:
`row`, the T tokens as one sequence (what packing without boundaries would cost: the floor);
`packed`, with cu_seqlens; `loop`, one call per document from here (what a backend without
packing support costs); `padded`, the documents as a batch padded to the longest.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from layerzoo.kernels import gated_delta_rule, mlstm, sliding_window_attention

from .runner.arguments import positive_int
from .runner.kernel_modes import MODES
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table, ms, ratio
from .runner.timing import Cell, time_cells

# (family, backend): the CPU defaults for packed sequences under autograd
KERNELS = [("sliding_window_attention", "chunkwise"), ("mlstm", "chunkwise"), ("gated_delta_rule", "native")]
WINDOW = 128
WAYS = ("row", "packed", "loop", "padded")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seq-len", type=positive_int, default=4096, help="tokens in the packed row")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one set of document lengths each")
    parser.add_argument("--median-fraction", type=positive_int, default=8, help="document median: T / this")
    parser.set_defaults(reps=7, budget=None)


def document_lengths(total: int, seed: int, median: float, sigma: float = 1.0) -> list[int]:
    """Log-normal lengths of the given median until they fill `total` tokens (the last one cut)."""
    gen = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while sum(lengths) < total:
        length = max(1, round(math.exp(math.log(median) + sigma * torch.randn(1, generator=gen).item())))
        lengths.append(min(length, total - sum(lengths)))
    return lengths


def make_inputs(family: str, batch: int, length: int) -> dict[str, torch.Tensor]:
    """The family's inputs, (batch, length, H, D) and (batch, length, H) gates."""
    gen = torch.Generator().manual_seed(0)
    if family == "sliding_window_attention":
        inputs = {name: torch.randn(batch, length, 8, 64, generator=gen) for name in "qkv"}
    else:
        shape = (batch, length, 4)
        inputs = {"q": torch.randn(*shape, 64, generator=gen),
                  "k": F.normalize(torch.randn(*shape, 64, generator=gen), dim=-1),
                  "v": torch.randn(*shape, 128, generator=gen)}
        if family == "mlstm":
            inputs |= {"i": torch.randn(shape, generator=gen), "f": 3 + torch.randn(shape, generator=gen)}
        else:
            inputs |= {"g": F.logsigmoid(torch.randn(shape, generator=gen) + 2), "beta": torch.rand(shape, generator=gen)}
    return {name: t.requires_grad_() for name, t in inputs.items()}


def call(family: str, backend: str, inputs: dict, cu_seqlens: torch.Tensor | None = None) -> torch.Tensor:
    if family == "sliding_window_attention":
        return sliding_window_attention(**inputs, window=WINDOW, backend=backend, cu_seqlens=cu_seqlens)
    kernel = mlstm if family == "mlstm" else gated_delta_rule
    return kernel(**inputs, backend=backend, cu_seqlens=cu_seqlens)


def ways(family: str, backend: str, lengths: list[int]) -> dict:
    """{way: fn} for the four ways of running the documents (fn: the output)."""
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    row, packed = make_inputs(family, 1, sum(lengths)), make_inputs(family, 1, sum(lengths))
    padded = make_inputs(family, len(lengths), max(lengths))

    def loop():
        pieces = {name: t.split(lengths, dim=1) for name, t in packed.items()}
        return torch.cat([call(family, backend, {name: parts[i] for name, parts in pieces.items()})
                          for i in range(len(lengths))], dim=1)

    return {"row": lambda: call(family, backend, row), "packed": lambda: call(family, backend, packed, offsets),
            "loop": loop, "padded": lambda: call(family, backend, padded)}


def cells(args: argparse.Namespace, seed: int, lengths: list[int]) -> list[Cell]:
    result = []
    for family, backend in KERNELS:
        for way, fn in ways(family, backend, lengths).items():
            labels = {"seed": seed, "family": family, "backend": backend, "way": way}
            result.append(Cell({**labels, "mode": "forward"}, fn))
            result.append(Cell({**labels, "mode": "forward_backward"}, lambda fn=fn: fn().sum().backward()))
    return result


def run(args: argparse.Namespace) -> dict:
    lengths = {seed: document_lengths(args.seq_len, seed, args.seq_len / args.median_fraction) for seed in args.seeds}
    timed = [cell for seed in args.seeds for cell in cells(args, seed, lengths[seed])]
    # Every cell once before the rounds: thread pools, the compiled kernels' build; each cell is short.
    rows = time_cells(timed, rounds=args.reps, budget=args.budget, warmups=[cell.run for cell in timed])
    return {"rows": rows, "lengths": {str(seed): lengths[seed] for seed in args.seeds}}


def render(data: dict) -> str:
    config, rows = data["config"], data["rows"]
    head = ["kernel", "seed", "docs", "longest", *(f"{way} {label} ms" for label in ("fwd", "fwd+bwd") for way in WAYS),
            "padded / packed fwd", "padded / packed fwd+bwd", "packed / row fwd+bwd"]
    table = []
    for seed in config["seeds"]:
        lengths = data["lengths"][str(seed)]
        for family, backend in KERNELS:
            def seconds(way, mode):
                return value(rows, "seconds", seed=seed, family=family, backend=backend, way=way, mode=mode)

            table.append([f"{family} ({backend})", str(seed), str(len(lengths)), str(max(lengths)),
                          *(ms(seconds(way, mode)) for mode in MODES for way in WAYS),
                          *(ratio(seconds("padded", mode), seconds("packed", mode), 2) for mode in MODES),
                          ratio(seconds("packed", "forward_backward"), seconds("row", "forward_backward"), 2)])
    caption = (f"T = {config['seq_len']}, documents of median T / {config['median_fraction']}, fp32, best of "
               f"{config['reps']} interleaved rounds")
    return f"{caption}\n\n{markdown_table(head, table)}"


BENCHMARK = Benchmark(
    name="packed", description="Packed sequences (cu_seqlens) against padding to the longest and a call per document",
    add_arguments=add_arguments, run=run, render=render,
    smoke={"seq_len": 256, "seeds": [0]},
)
