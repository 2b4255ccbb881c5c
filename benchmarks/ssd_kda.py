"""SSD and KDA kernels: time against sequence length, per backend, both kernels in one run.

    python benchmarks/ssd_kda.py                               # CPU, fp32, T = 512 ... 4096
    python benchmarks/ssd_kda.py --threads 1 --json ssd_kda.json
    python benchmarks/ssd_kda.py --device cuda --dtype bf16    # adds fla's Triton kernels

Prints, per kernel, a markdown table of the best forward and forward+backward times of each
backend over rounds that run every cell of both kernels once each (see
common.interleaved_best_seconds): the step loop (backend "reference"); chunkwise, whose forward is
compiled on CPU (each family's cpu_forward.cpp; its backward is PyTorch); on CPU
`chunkwise_torch`, the same kernel in PyTorch (what runs where the compiled one cannot be built);
`fla_naive`, flash-linear-attention's own PyTorch chunk reference (naive_chunk_simple_gla,
naive_chunk_kda: the peer); on CUDA fla's Triton kernels. Then the chunkwise speedups at
T = 4096 and how chunkwise time scales with T (a fitted exponent; 1 is linear). Inputs are each
kernel's typical ones: SSD's keys as Mamba-2 makes them (dt B), KDA's normalised, with a decay
per key channel. fla's naive KDA takes whole chunks only, so T should be a multiple of the chunk.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # layerzoo, and the peers the tests load too

from layerzoo.kernels import kda, ssd  # noqa: E402
from peers import load_fla_naive  # noqa: E402

from common import (  # noqa: E402
    DTYPES, add_chunkwise_shape_arguments, add_step_loop_sweep_arguments, interleaved_best_seconds, markdown_table,
    scaling_exponent, sweep_parser, write_json,
)

SPEEDUP_AT = 4096
# kernel -> (layerzoo's function, fla's op (its naive.py), whether it is the delta rule)
KERNELS = {"ssd": (ssd, "simple_gla", False), "kda": (kda, "kda", True)}


def make_inputs(args, kernel: str, seq_len: int, requires_grad: bool) -> list[torch.Tensor]:
    """q, k, v, g (and beta for KDA): the kernel's typical input, in the kernel's argument order."""
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, seq_len, args.heads)
    delta_rule = KERNELS[kernel][2]
    q = torch.randn(*shape, args.key_dim, generator=gen)
    k = torch.randn(*shape, args.key_dim, generator=gen)
    k = F.normalize(k, dim=-1) if delta_rule else k * 0.01  # Mamba-2's k is dt B, dt ~ 1e-3 .. 0.1
    v = torch.randn(*shape, args.value_dim, generator=gen)
    g = F.logsigmoid(torch.randn((*shape, args.key_dim) if delta_rule else shape, generator=gen) + 2)
    gates = [g, torch.rand(shape, generator=gen)] if delta_rule else [g]
    tensors = [t.to(args.device, DTYPES[args.dtype]) for t in (q, k, v)] + [t.to(args.device) for t in gates]
    return [t.requires_grad_(requires_grad) for t in tensors]


def runners(args, kernel: str, backend: str, seq_len: int) -> dict:
    """{"forward": fn, "forward_backward": fn}: closures over this cell's inputs, run to time."""
    function, fla_op, _ = KERNELS[kernel]
    if backend == "fla_naive":
        naive = getattr(load_fla_naive(fla_op), f"naive_chunk_{fla_op}")

        def run(*inputs):
            return naive(*inputs, chunk_size=args.chunk_size)[0]
    else:
        def run(*inputs):
            return function(*inputs, chunk_size=args.chunk_size, backend=backend.removesuffix("_torch"))

    inputs = make_inputs(args, kernel, seq_len, requires_grad=False)
    leaves = make_inputs(args, kernel, seq_len, requires_grad=True)
    grad_out = torch.randn(args.batch, seq_len, args.heads, args.value_dim).to(args.device, DTYPES[args.dtype])

    # chunkwise_torch: the chunkwise kernel with the compiled CPU forward turned off
    implementation = contextlib.nullcontext()
    if backend == "chunkwise_torch":
        implementation = mock.patch.dict(os.environ, {"LAYERZOO_NATIVE": "0"})

    @torch.no_grad()
    def forward():
        with implementation:
            run(*inputs)

    def forward_backward():
        with implementation:
            run(*leaves).backward(grad_out)
        for t in leaves:
            t.grad = None

    return {"forward": forward, "forward_backward": forward_backward}


def measure(args, backends: list[str]) -> dict:
    """{kernel: [one row per T with each timed backend's best times]}, every cell in one set of rounds."""
    cells = {}
    for kernel in KERNELS:
        for seq_len in args.seq_lens:
            for backend in backends:
                if backend != "reference" or seq_len <= args.reference_max_len:
                    for mode, fn in runners(args, kernel, backend, seq_len).items():
                        cells[kernel, seq_len, backend, mode] = fn
        for backend in backends:  # warm-up: thread pools, lazily loaded code
            for fn in runners(args, kernel, backend, args.chunk_size).values():
                fn()
    best = interleaved_best_seconds(cells, args.reps, args.budget, args.device)
    return {kernel: [{"seq_len": seq_len, **{
        backend: {f"{mode}_s": best[kernel, seq_len, backend, mode] for mode in ("forward", "forward_backward")}
        for backend in backends if (kernel, seq_len, backend, "forward") in best}} for seq_len in args.seq_lens]
        for kernel in KERNELS}


def summary(rows: list[dict]) -> dict:
    """Chunkwise speedups over the other backends at T = SPEEDUP_AT, and its scaling exponents in T."""
    at = next((r for r in rows if r["seq_len"] == SPEEDUP_AT), {})
    result = {f"chunkwise_speedup_at_{SPEEDUP_AT}": {
        peer: {key[:-2]: at[peer][key] / at["chunkwise"][key] for key in ("forward_s", "forward_backward_s")}
        for peer in at if peer not in ("seq_len", "chunkwise")}}
    if len(rows) > 1:
        for key in ("forward_s", "forward_backward_s"):
            result[f"chunkwise_{key[:-2]}_scaling_exponent"] = scaling_exponent(
                [r["seq_len"] for r in rows], [r["chunkwise"][key] for r in rows])
    return result


def report(kernel: str, rows: list[dict], backends: list[str], numbers: dict) -> None:
    head = ["T"] + [f"{b} {kind} ms" for b in backends for kind in ("fwd", "fwd+bwd")]
    table = [[str(r["seq_len"])] + [f"{r[b][k] * 1e3:.1f}" if b in r else "skipped"
                                    for b in backends for k in ("forward_s", "forward_backward_s")] for r in rows]
    print(f"### {kernel}\n")
    print(markdown_table(head, table))
    print()
    for peer, speedup in numbers[f"chunkwise_speedup_at_{SPEEDUP_AT}"].items():
        print(f"- chunkwise / {peer} speedup at T={SPEEDUP_AT}: forward {speedup['forward']:.1f}x, "
              f"forward+backward {speedup['forward_backward']:.1f}x")
    if len(rows) > 1:
        print(f"- chunkwise time ~ T^p: p = {numbers['chunkwise_forward_scaling_exponent']:.2f} forward, "
              f"{numbers['chunkwise_forward_backward_scaling_exponent']:.2f} forward+backward (1 is linear)")
    print()


def main() -> None:
    parser = sweep_parser(__doc__)
    parser.set_defaults(seq_lens=[512, 1024, 2048, 4096])
    add_chunkwise_shape_arguments(parser)
    add_step_loop_sweep_arguments(parser)
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    backends = ["reference", "chunkwise"] + (["fla"] if args.device.startswith("cuda") else ["chunkwise_torch"])
    backends += ["fla_naive"] if load_fla_naive() else []
    results = measure(args, backends)
    print(f"SSD and KDA, B={args.batch}, H={args.heads}, K={args.key_dim}, V={args.value_dim}, chunk {args.chunk_size}, "
          f"{args.dtype}, {args.device}, {torch.get_num_threads()} threads, torch {torch.__version__}; best of up "
          f"to {args.reps} interleaved runs\n")
    summaries = {kernel: summary(rows) for kernel, rows in results.items()}
    for kernel, rows in results.items():
        report(kernel, rows, backends, summaries[kernel])
    write_json(args, rows=results, summary=summaries)


if __name__ == "__main__":
    main()
