"""Packed sequences (cu_seqlens) against padding to the longest, per kernel and backend.

    python benchmarks/packed.py                      # CPU, fp32, T = 4096, seeds 0 1 2
    python benchmarks/packed.py --threads 1 --json packed.json

A row of T tokens holds documents of log-normal lengths (median T / 8, or --median-fraction;
sigma 1; the last one cut to fit), as a packed training batch does. Each kernel runs it four ways, as cells of the same
interleaved rounds (common.interleaved_best_seconds): `row`, the T tokens as one sequence (what
packing without boundaries would cost: the floor); `packed`, with cu_seqlens; `loop`, one call per
document from here (what a backend without packing support costs); `padded`, the documents as a
batch padded to the longest. Prints the best forward and forward+backward milliseconds and the
speedup of packed over padded (the issue asks for >= 1.5x tokens/s in training).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from layerzoo.kernels import gated_delta_rule, mlstm, sliding_window_attention  # noqa: E402

from common import interleaved_best_seconds, markdown_table  # noqa: E402

# (family, backend): the CPU defaults, and the PyTorch gated delta rule (where no compiler is)
KERNELS = [("sliding_window_attention", "chunkwise"), ("mlstm", "chunkwise"), ("gated_delta_rule", "chunkwise")]
WINDOW = 128


def document_lengths(total: int, seed: int, median: float, sigma: float = 1.0) -> list[int]:
    """Log-normal lengths of the given median until they fill `total` tokens (the last one cut)."""
    gen = torch.Generator().manual_seed(seed)
    lengths: list[int] = []
    while sum(lengths) < total:
        length = max(1, round(math.exp(math.log(median) + sigma * torch.randn(1, generator=gen).item())))
        lengths.append(min(length, total - sum(lengths)))
    return lengths


def make_inputs(family: str, batch: int, length: int) -> dict[str, torch.Tensor]:
    """The family's inputs, shaped as its README benchmark: SWA H=8, D=64; recurrences H=4, K=64, V=128."""
    gen = torch.Generator().manual_seed(0)
    if family == "sliding_window_attention":
        inputs = {name: torch.randn(batch, length, 8, 64, generator=gen) for name in "qkv"}
    else:
        shape = (batch, length, 4)
        inputs = {"q": torch.randn(*shape, 64, generator=gen), "k": F.normalize(torch.randn(*shape, 64, generator=gen), dim=-1),
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


def cells(family: str, backend: str, lengths: list[int]) -> dict:
    """{(way, mode): fn} for the four ways of running the documents, forward and forward+backward."""
    total = sum(lengths)
    offsets = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    row, packed, padded = make_inputs(family, 1, total), make_inputs(family, 1, total), make_inputs(family, len(lengths), max(lengths))

    def loop(inputs):
        pieces = {name: t.split(lengths, dim=1) for name, t in inputs.items()}
        return torch.cat([call(family, backend, {name: parts[i] for name, parts in pieces.items()})
                          for i in range(len(lengths))], dim=1)

    ways = {"row": lambda: call(family, backend, row), "packed": lambda: call(family, backend, packed, offsets),
            "loop": lambda: loop(packed), "padded": lambda: call(family, backend, padded)}
    result = {}
    for way, fn in ways.items():
        result[way, "forward"] = fn
        result[way, "forward_backward"] = lambda fn=fn: fn().sum().backward()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq-len", type=int, default=4096)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--median-fraction", type=int, default=8, help="document median: T / this")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    rows, records = [], []
    for seed in args.seeds:
        lengths = document_lengths(args.seq_len, seed, args.seq_len / args.median_fraction)
        for family, backend in KERNELS:
            timed = {(seed, family, backend, *key): fn for key, fn in cells(family, backend, lengths).items()}
            for fn in timed.values():
                fn()  # warm-up: thread pools, the compiled kernel's build
            best = interleaved_best_seconds(timed, args.reps, budget=float("inf"), device="cpu")
            ms = {key[3:]: seconds * 1e3 for key, seconds in best.items()}
            record = {"seed": seed, "family": family, "backend": backend, "lengths": lengths,
                      "ms": {f"{way} {mode}": value for (way, mode), value in ms.items()}}
            records.append(record)
            rows.append([f"{family} {backend}", str(len(lengths)), str(max(lengths)),
                         *(f"{ms[way, mode]:.1f}" for mode in ("forward", "forward_backward")
                           for way in ("row", "packed", "loop", "padded")),
                         *(f"{ms['padded', mode] / ms['packed', mode]:.2f}x" for mode in ("forward", "forward_backward"))])
    head = ["kernel", "docs", "longest", *(f"{way} {mode} ms" for mode in ("fwd", "fwd+bwd")
                                          for way in ("row", "packed", "loop", "padded")),
            "padded / packed fwd", "padded / packed fwd+bwd"]
    print(f"T = {args.seq_len}, fp32, {torch.get_num_threads()} threads, best of {args.reps} interleaved rounds")
    print(markdown_table(head, rows))
    if args.json:
        args.json.write_text(json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
