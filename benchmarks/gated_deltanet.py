"""Gated delta rule kernels: time against sequence length, per backend.

    python benchmarks/gated_deltanet.py                        # CPU, fp32, T = 1024 ... 16384
    python benchmarks/gated_deltanet.py --seq-lens 4096 --json gdn.json
    python benchmarks/gated_deltanet.py --device cuda --dtype bf16     # adds fla's Triton kernel

Prints a markdown table of the best forward and forward+backward times of each backend over
rounds that run every cell once each (see common.interleaved_best_seconds): the step loop
(backend "reference"); chunkwise, compiled on CPU (cpu_forward.cpp, cpu_backward.cpp); on CPU
`chunkwise_torch`, the same kernel in PyTorch (what runs where the compiled one cannot be built);
`fla_naive`, flash-linear-attention's own PyTorch chunk reference, the peer; on CUDA fla's Triton
kernel. Then the chunkwise throughput as a fraction of this machine's fp32 matmul rate (a cell
of the same rounds), the chunkwise speedups at T = 4096, and how chunkwise time scales with T (a
fitted exponent; 1 is linear). The step loop is skipped above --reference-max-len: it runs T
Python steps, forward and backward, and would dominate the run. torch's default thread count
(--threads to change it): the chunkwise kernel spreads heads (compiled) or batched matmuls
(PyTorch) over every core, while the step loop, bound by per-op dispatch, does not care.
"""

from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path
from unittest import mock

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # layerzoo, and the peers the tests load too

from layerzoo.kernels import gated_delta_rule  # noqa: E402
from layerzoo.kernels.gated_delta_rule.native import load_native_ops  # noqa: E402
from peers import load_fla_naive  # noqa: E402

from common import (  # noqa: E402
    DTYPES, add_chunkwise_shape_arguments, add_step_loop_sweep_arguments, markdown_table, scaling_exponent,
    sweep_best_times, sweep_parser, write_json,
)

SPEEDUP_AT = 4096


def make_inputs(args, seq_len: int, requires_grad: bool):
    """q, k (normalised, as Gated DeltaNet feeds them), v, g, beta: the kernel's typical input."""
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, seq_len, args.heads)
    dtype = DTYPES[args.dtype]
    q = torch.randn(*shape, args.key_dim, generator=gen)
    k = F.normalize(torch.randn(*shape, args.key_dim, generator=gen), dim=-1)
    v = torch.randn(*shape, args.value_dim, generator=gen)
    g = F.logsigmoid(torch.randn(shape, generator=gen) + 2)
    beta = torch.rand(shape, generator=gen)
    tensors = [t.to(args.device, dtype) for t in (q, k, v)] + [t.to(args.device) for t in (g, beta)]
    return [t.requires_grad_(requires_grad) for t in tensors]


def runners(args, backend: str, seq_len: int) -> dict:
    """{"forward": fn, "forward_backward": fn}: closures over this cell's inputs, run to time."""
    if backend == "fla_naive":
        naive = load_fla_naive()

        def run(*inputs):
            return naive.naive_chunk_gated_delta_rule(*inputs, chunk_size=args.chunk_size)[0]
    else:
        def run(*inputs):
            return gated_delta_rule(*inputs, chunk_size=args.chunk_size, backend=backend.removesuffix("_torch"))

    inputs = make_inputs(args, seq_len, requires_grad=False)
    leaves = make_inputs(args, seq_len, requires_grad=True)
    grad_out = torch.randn(args.batch, seq_len, args.heads, args.value_dim).to(args.device, DTYPES[args.dtype])

    # chunkwise_torch: the chunkwise kernel with the compiled CPU one turned off, backward included
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


def chunkwise_flops(args, seq_len: int) -> float:
    """Matmul FLOPs of one chunkwise forward (elementwise work left out).

    Per chunk of C tokens and head: A = (beta k) k^T, q k^T (2 C^2 K each); (I + A)^-1 by a
    triangular solve against I (C^3); w, u (2 C^2 K, 2 C^2 V); v_new, the state update and q S
    (2 C K V each); scores @ v_new (2 C^2 V).
    """
    c, k, v = min(args.chunk_size, seq_len), args.key_dim, args.value_dim
    per_chunk = 6 * c * c * k + 4 * c * c * v + c**3 + 6 * c * k * v
    return args.batch * args.heads * math.ceil(seq_len / c) * per_chunk


def measure(args, backends: list[str]) -> tuple[list[dict], float]:
    """One row per T with each timed backend's best times, and this machine's fp32 matmul GFLOP/s."""
    times, peak = sweep_best_times(args, backends, runners, 4096 if args.device.startswith("cuda") else 2048)
    rows = []
    for seq_len in args.seq_lens:
        row = {"seq_len": seq_len, **{b: times[seq_len, b] for b in backends if times[seq_len, b]}}
        row["chunkwise_gflops"] = chunkwise_flops(args, seq_len) / row["chunkwise"]["forward_s"] / 1e9
        row["fraction_of_matmul"] = row["chunkwise_gflops"] / peak
        rows.append(row)
    return rows, peak


def markdown(rows: list[dict], backends: list[str]) -> str:
    head = ["T"] + [f"{b} {kind} ms" for b in backends for kind in ("fwd", "fwd+bwd")]
    head += ["chunkwise fwd GFLOP/s", "of matmul peak"]
    table = []
    for r in rows:
        cells = [str(r["seq_len"])]
        for b in backends:
            timing = r.get(b)
            cells += [f"{timing[k] * 1e3:.1f}" if timing else "skipped" for k in ("forward_s", "forward_backward_s")]
        cells += [f"{r['chunkwise_gflops']:.1f}", f"{r['fraction_of_matmul']:.0%}"]
        table.append(cells)
    return markdown_table(head, table)


def main() -> None:
    parser = sweep_parser(__doc__)
    add_chunkwise_shape_arguments(parser)
    add_step_loop_sweep_arguments(parser)
    args = parser.parse_args()

    if args.threads:
        torch.set_num_threads(args.threads)
    backends = ["reference", "chunkwise"] + (["fla"] if args.device.startswith("cuda") else ["chunkwise_torch"])
    backends += ["fla_naive"] if load_fla_naive() else []
    rows, peak = measure(args, backends)
    compiled = args.device == "cpu" and load_native_ops() is not None

    summary = {"matmul_gflops": peak}
    at = next((r for r in rows if r["seq_len"] == SPEEDUP_AT), {})
    # how many times faster chunkwise is than each other CPU backend timed at T = SPEEDUP_AT
    speedups = summary[f"chunkwise_speedup_at_{SPEEDUP_AT}"] = {
        peer: {key[:-2]: at[peer][key] / at["chunkwise"][key] for key in ("forward_s", "forward_backward_s")}
        for peer in ("reference", "chunkwise_torch", "fla_naive") if peer in at
    }
    if len(rows) > 1:
        for key in ("forward_s", "forward_backward_s"):
            summary[f"chunkwise_{key[:-2]}_scaling_exponent"] = scaling_exponent(
                [r["seq_len"] for r in rows], [r["chunkwise"][key] for r in rows])

    print(
        f"gated delta rule, B={args.batch}, H={args.heads}, K={args.key_dim}, V={args.value_dim}, "
        f"chunk {args.chunk_size}, {args.dtype}, {args.device}, {torch.get_num_threads()} threads, "
        f"torch {torch.__version__}; best of up to {args.reps} interleaved runs"
    )
    print()
    print(markdown(rows, backends))
    print()
    if args.device == "cpu":
        print(f"- chunkwise: {'compiled' if compiled else 'PyTorch (the compiled kernels did not build)'}")
    print(f"- fp32 matmul rate measured in this run: {peak:.1f} GFLOP/s; chunkwise GFLOP/s counts its "
          "matmul FLOPs only (see chunkwise_flops)")
    for peer, speedup in speedups.items():
        print(f"- chunkwise / {peer} speedup at T={SPEEDUP_AT}: forward {speedup['forward']:.1f}x, "
              f"forward+backward {speedup['forward_backward']:.1f}x")
    if len(rows) > 1:
        print(f"- chunkwise time ~ T^p: p = {summary['chunkwise_forward_scaling_exponent']:.2f} forward, "
              f"{summary['chunkwise_forward_backward_scaling_exponent']:.2f} forward+backward (1 is linear)")
    skipped = [r["seq_len"] for r in rows if "reference" not in r]
    if skipped:
        print(f"- reference skipped at T = {', '.join(map(str, skipped))} (> --reference-max-len "
              f"{args.reference_max_len}): T Python steps forward and backward, linear but slow")
    write_json(args, rows=rows, summary=summary)


if __name__ == "__main__":
    main()
