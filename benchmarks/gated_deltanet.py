"""Gated delta rule kernels: time against sequence length, per backend.

    python -m benchmarks gated_deltanet                        # CPU, fp32, T = 1024 ... 16384
    python -m benchmarks gated_deltanet --seq-lens 4096 --threads 1
    python -m benchmarks gated_deltanet --device cuda --dtype bf16    # adds fla's Triton kernel

Inputs: q, k (B, T, H, K; k normalised, as Gated DeltaNet feeds it), v (B, T, H, V), log decay g
and beta (B, T, H); B=1, H=4, K=64, V=128, chunk 64 by default. Each backend is timed forward and
forward+backward at every T (runner/backend_sweep.py), each by its backend's name: the step loop
("reference"); on CPU "native", the compiled kernel (cpu_forward.cpp, cpu_backward.cpp);
"chunkwise", the same algorithm in PyTorch (what runs where the compiled one cannot be built);
"fla_naive", flash-linear-attention's own PyTorch chunk reference (naive_chunk_gated_delta_rule),
the peer; on CUDA fla's Triton kernel. torch's default thread count: the chunked kernels spread
heads (native) or batched matmuls (chunkwise) over every core, while the step loop, bound by
per-op dispatch, does not care.
"""

from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F

from layerzoo.kernels import gated_delta_rule
from layerzoo.testing.peers import load_fla_naive

from .runner.arguments import DTYPES
from .runner.backend_sweep import SMOKE, Kernel, add_sweep_arguments, render_sweep, run_sweep, summary_rows
from .runner.registry import Benchmark


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sweep_arguments(parser, [1024, 2048, 4096, 8192, 16384])


def inputs(args: argparse.Namespace, seq_len: int, method: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    """q, k, v, g, beta: the kernel's typical input (g and beta stay fp32), and a gradient of o."""
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, seq_len, args.heads)
    dtype = DTYPES[args.dtype]
    q = torch.randn(*shape, args.key_dim, generator=gen)
    k = F.normalize(torch.randn(*shape, args.key_dim, generator=gen), dim=-1)
    v = torch.randn(*shape, args.value_dim, generator=gen)
    g = F.logsigmoid(torch.randn(shape, generator=gen) + 2)
    beta = torch.rand(shape, generator=gen)
    tensors = [t.to(args.device, dtype) for t in (q, k, v)] + [t.to(args.device) for t in (g, beta)]
    return tensors, torch.randn_like(tensors[2])


def call(args: argparse.Namespace, method: str):
    if method == "fla_naive":
        naive = load_fla_naive().naive_chunk_gated_delta_rule
        return lambda *x: naive(*x, chunk_size=args.chunk_size)[0]
    return lambda *x: gated_delta_rule(*x, chunk_size=args.chunk_size, backend=method)


def chunkwise_flops(args: argparse.Namespace, seq_len: int) -> float:
    """Matmul FLOPs of one chunkwise forward (elementwise work left out).

    Per chunk of C tokens and head: A = (beta k) k^T, q k^T (2 C^2 K each); (I + A)^-1 by a
    triangular solve against I (C^3); w, u (2 C^2 K, 2 C^2 V); v_new, the state update and q S
    (2 C K V each); scores @ v_new (2 C^2 V).
    """
    c, k, v = min(args.chunk_size, seq_len), args.key_dim, args.value_dim
    per_chunk = 6 * c * c * k + 4 * c * c * v + c**3 + 6 * c * k * v
    return args.batch * args.heads * math.ceil(seq_len / c) * per_chunk


KERNEL = Kernel("gated_delta_rule", inputs, call, chunkwise_flops)


def methods_here(args: argparse.Namespace) -> list[str]:
    """reference, then native and chunkwise on CPU or chunkwise and fla's Triton kernel on CUDA, and
    fla's naive chunk code where fla is installed."""
    cuda = args.device.startswith("cuda")
    methods = ["reference", "chunkwise", "fla"] if cuda else ["reference", "native", "chunkwise"]
    return methods + (["fla_naive"] if load_fla_naive() else [])


def run(args: argparse.Namespace) -> dict:
    return run_sweep(args, [KERNEL], methods_here(args))


def shape_of(config: dict) -> str:
    return f"B{config['batch']} H{config['heads']} K{config['key_dim']} V{config['value_dim']}"


def render(data: dict) -> str:
    return render_sweep(data, [KERNEL], shape_of(data["config"]))


def summary(data: dict) -> list:
    return summary_rows(data, KERNEL, "Gated DeltaNet", shape_of(data["config"]),
                        {"fla_naive": "fla's naive chunk code", "fla": "fla's Triton kernel"})


BENCHMARK = Benchmark(
    name="gated_deltanet", description="Gated delta rule kernels: step loop, native (CPU), chunkwise, fla against T",
    add_arguments=add_arguments, run=run, render=render, summary=summary,
    smoke=SMOKE,
    packages=("fla-core", "triton"),
)
