"""SSD (Mamba-2) and Kimi Delta Attention kernels: time against sequence length, per backend, both in one run.

    python -m benchmarks ssd_kda                               # CPU, fp32, T = 512 ... 4096
    python -m benchmarks ssd_kda --threads 1
    python -m benchmarks ssd_kda --device cuda --dtype bf16    # adds fla's Triton kernels

Inputs, each kernel's typical ones: q, k (B, T, H, K), v (B, T, H, V); SSD's keys as Mamba-2 makes
them (dt B, small) and a log decay g (B, T, H) per head; KDA's keys normalised, g (B, T, H, K) per
key channel and beta (B, T, H). B=1, H=4, K=64, V=128, chunk 64 by default. Each backend is timed
forward and forward+backward at every T, the cells of both kernels in one set of rounds
(runner/backend_sweep.py), each by its backend's name: the step loop ("reference"); on CPU
"native", whose forward is compiled (each family's cpu_forward.cpp; its forward+backward is
chunkwise's PyTorch); "chunkwise", the same algorithm in PyTorch; "fla_naive",
flash-linear-attention's own PyTorch chunk reference (naive_chunk_simple_gla, naive_chunk_kda:
the peer); on CUDA fla's Triton kernels. fla's naive
KDA takes whole chunks only, so T should be a multiple of the chunk.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from layerzoo.kernels import kda, ssd
from layerzoo.testing.peers import load_fla_naive

from .gated_deltanet import methods_here, shape_of
from .runner.arguments import DTYPES
from .runner.backend_sweep import SMOKE, Kernel, add_sweep_arguments, render_sweep, run_sweep, summary_rows
from .runner.registry import Benchmark

# kernel -> (layerzoo's function, fla's op (its naive.py), whether it is a delta rule)
FAMILIES = {"ssd": (ssd, "simple_gla", False), "kda": (kda, "kda", True)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sweep_arguments(parser, [512, 1024, 2048, 4096])


def family_inputs(family: str):
    """inputs(args, seq_len, method) of `family`: q, k, v, g (and beta for KDA), and a gradient of o."""
    delta_rule = FAMILIES[family][2]

    def inputs(args: argparse.Namespace, seq_len: int, method: str) -> tuple[list[torch.Tensor], torch.Tensor]:
        gen = torch.Generator().manual_seed(0)
        shape = (args.batch, seq_len, args.heads)
        q = torch.randn(*shape, args.key_dim, generator=gen)
        k = torch.randn(*shape, args.key_dim, generator=gen)
        k = F.normalize(k, dim=-1) if delta_rule else k * 0.01  # Mamba-2's k is dt B, dt ~ 1e-3 .. 0.1
        v = torch.randn(*shape, args.value_dim, generator=gen)
        g = F.logsigmoid(torch.randn((*shape, args.key_dim) if delta_rule else shape, generator=gen) + 2)
        gates = [g, torch.rand(shape, generator=gen)] if delta_rule else [g]
        tensors = [t.to(args.device, DTYPES[args.dtype]) for t in (q, k, v)] + [t.to(args.device) for t in gates]
        return tensors, torch.randn_like(tensors[2])

    return inputs


def family_call(family: str):
    function, fla_op, _ = FAMILIES[family]

    def call(args: argparse.Namespace, method: str):
        if method == "fla_naive":
            naive = getattr(load_fla_naive(fla_op), f"naive_chunk_{fla_op}")
            return lambda *x: naive(*x, chunk_size=args.chunk_size)[0]
        return lambda *x: function(*x, chunk_size=args.chunk_size, backend=method)

    return call


KERNELS = [Kernel(family, family_inputs(family), family_call(family)) for family in FAMILIES]


def run(args: argparse.Namespace) -> dict:
    return run_sweep(args, KERNELS, methods_here(args))


def render(data: dict) -> str:
    return render_sweep(data, KERNELS, shape_of(data["config"]))


def summary(data: dict) -> list:
    peers = {"fla_naive": "fla's naive chunk code", "fla": "fla's Triton kernel"}
    return [row for kernel, label in zip(KERNELS, ("SSD", "KDA"))
            for row in summary_rows(data, kernel, label, shape_of(data["config"]), peers)]


BENCHMARK = Benchmark(
    name="ssd_kda",
    description="SSD (Mamba-2) and KDA kernels: step loop, native (compiled forward), chunkwise, fla against T",
    add_arguments=add_arguments, run=run, render=render, summary=summary,
    smoke=SMOKE,
    packages=("fla-core", "triton"),
)
