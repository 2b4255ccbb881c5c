"""mLSTM kernels on CPU: the step loop (backend "reference"), layerzoo's native and chunkwise forms and mlstm_kernels'.

    python -m benchmarks mlstm                        # T = 1024 ... 16384, fp32, torch's threads
    python -m benchmarks mlstm --seq-lens 4096 --threads 1

Inputs: q, k (B, T, H, Dk), v (B, T, H, Dv), gates i, f (B, T, H), B=1, H=4, Dk=64, Dv=128, chunk
64 by default (mlstm_kernels takes them heads first, (B, H, T, ...)). Each backend is timed
forward and forward+backward (a dense random gradient of h) at every T (runner/backend_sweep.py).
On CPU "native" runs its forward compiled (cpu_forward.cpp) where autograd records nothing, its
forward+backward in PyTorch; "chunkwise" is the same kernel in PyTorch throughout. mlstm_kernels
(NX-AI's PyTorch chunkwise kernel) is timed where installed; it is not a layerzoo dependency.

On Linux the run starts itself with glibc told to keep freed memory (KEEP_MEMORY): on some VMs
the page faults of every fresh large buffer cost more than the arithmetic on it, and that hits
the chunkwise kernel's (L, L) blocks, not the step loop's small tensors. --no-keep-memory
measures with the allocator's defaults.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys

import torch

from layerzoo.kernels import mlstm

from .runner.arguments import DTYPES
from .runner.backend_sweep import SMOKE, Kernel, add_sweep_arguments, render_sweep, run_sweep, summary_rows
from .runner.kernel_modes import compiled_kernel_loads
from .runner.registry import Benchmark

KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**34)}
PEER = "mlstm_kernels"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_sweep_arguments(parser, [1024, 2048, 4096, 8192, 16384], dtypes=("fp32", "bf16"),
                        dtype_help="of q, k, v (the gates stay fp32)")
    parser.add_argument("--no-keep-memory", dest="keep_memory", action="store_false",
                        help="leave glibc's malloc settings alone")
    parser.set_defaults(reps=7)


def environment(args: argparse.Namespace) -> dict[str, str]:
    return KEEP_MEMORY if args.keep_memory and sys.platform == "linux" else {}


def inputs(args: argparse.Namespace, seq_len: int, method: str) -> tuple[list[torch.Tensor], torch.Tensor]:
    """q, k, v, i, f and a gradient of h; forget gates near sigmoid(3), as at init."""
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, seq_len, args.heads)
    tensors = [torch.randn(*shape, args.key_dim, generator=gen), torch.randn(*shape, args.key_dim, generator=gen),
               torch.randn(*shape, args.value_dim, generator=gen), torch.randn(shape, generator=gen),
               3 + torch.randn(shape, generator=gen)]
    if method == PEER:
        tensors = [t.transpose(1, 2).contiguous() for t in tensors]
    dtype = DTYPES[args.dtype]
    tensors = [t.to(args.device, dtype if t.dim() == 4 else torch.float32) for t in tensors]
    return tensors, torch.randn_like(tensors[2])


def call(args: argparse.Namespace, method: str):
    if method == PEER:
        from mlstm_kernels.torch.chunkwise.native import mlstm_chunkwise__native_autograd

        return lambda *x: mlstm_chunkwise__native_autograd(*x, chunk_size=args.chunk_size)
    return lambda *x: mlstm(*x, chunk_size=args.chunk_size, backend=method)


def chunkwise_flops(args: argparse.Namespace, seq_len: int) -> int:
    """Multiply-adds x 2 of the chunkwise forward's matmuls, as executed (full (L, L) blocks).

    Per token and head, chunk L = min(chunk_size, T): q k^T (2 L Dk), scores @ [v, 1]
    (2 L (Dv + 1)), q @ [C, n] and the chunk's own k^T [v, 1] (2 Dk (Dv + 1) each).
    """
    chunk, dk, dv = min(args.chunk_size, seq_len), args.key_dim, args.value_dim + 1
    return args.batch * args.heads * seq_len * (2 * chunk * dk + 2 * chunk * dv + 4 * dk * dv)


KERNEL = Kernel("mlstm", inputs, call, chunkwise_flops)


def run(args: argparse.Namespace) -> dict:
    methods = ["reference"] + (["native"] if args.device == "cpu" and compiled_kernel_loads("mlstm") else [])
    methods += ["chunkwise"]
    methods += [PEER] if importlib.util.find_spec("mlstm_kernels") else []
    kept = os.environ.get("MALLOC_MMAP_THRESHOLD_") == KEEP_MEMORY["MALLOC_MMAP_THRESHOLD_"]
    return {**run_sweep(args, [KERNEL], methods), "freed_memory": "kept by glibc" if kept else "allocator defaults"}


def shape_of(config: dict) -> str:
    return f"B{config['batch']} H{config['heads']} Dk{config['key_dim']} Dv{config['value_dim']}"


def render(data: dict) -> str:
    return render_sweep(data, [KERNEL], shape_of(data["config"]), f"; freed memory {data['freed_memory']}")


def summary(data: dict) -> list:
    return summary_rows(data, KERNEL, "mLSTM", shape_of(data["config"]), {PEER: "mlstm_kernels' PyTorch chunkwise"})


BENCHMARK = Benchmark(
    name="mlstm",
    description="mLSTM kernels on CPU: step loop, native (compiled forward), chunkwise, mlstm_kernels against T",
    add_arguments=add_arguments, run=run, render=render, summary=summary, environment=environment,
    smoke=SMOKE,
    packages=("mlstm_kernels",),
)
