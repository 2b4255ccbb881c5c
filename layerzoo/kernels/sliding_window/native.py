"""The "native" backend: cpu_forward.cpp and cpu_backward.cpp (built on first use by
native_build.py) behind an autograd Function.

Those kernels take fp32 or fp64 rows with unit feature stride; narrower inputs are computed in
fp32 (a cast copies them), and gradients return in the inputs' dtypes. Without a compiler, or with
LAYERZOO_NATIVE=0, `native_ops_for` says None and the chunkwise backend runs instead.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..common.dtypes import compute_dtype
from ..common.native_build import compiled_ops
from .chunkwise import sliding_window_attention_chunkwise

HERE = Path(__file__).parent
SOURCES = [HERE / "cpu_forward.cpp", HERE / "cpu_backward.cpp"]
# Lets GCC vectorise the loops of cpu_common.h's exp_of (their clamps are selects, which it keeps
# scalar while a comparison might trap); torch builds its own kernels with both. IEEE results are
# unchanged: no reassociation, no finite-math assumptions.
FLAGS = ("-fno-trapping-math", "-fno-math-errno")


def block_size(window: int) -> int:
    """Queries per block: window / 8 in [32, 128]. A block reads block + window - 1 keys for window
    useful ones per row, so small blocks waste less on the band's corners, and large ones make
    gemms BLAS runs faster."""
    return min(128, max(32, window // 8))


@functools.cache
def _register_for_tracing() -> None:
    torch.library.register_fake("layerzoo::sliding_window_forward")(_forward_fake)
    torch.library.register_fake("layerzoo::sliding_window_backward")(_backward_fake)


def _forward_fake(q, k, v, window, scale, block):
    """What torch.compile and torch.export see of the forward: [out (B, Tq, H, D), lse (B, H, Tq)]."""
    batch, q_len, heads, _ = q.shape
    return [q.new_empty(q.shape), q.new_empty(batch, heads, q_len)]


def _backward_fake(q, k, v, out, lse, d_out, window, scale, block):
    """[dq (B, Tq, H, D), dk, dv (B, Tk, H, D)]: per query head, as cpu_backward.cpp returns them."""
    shape = (k.shape[0], k.shape[1], q.shape[2], q.shape[3])
    return [q.new_empty(q.shape), q.new_empty(shape), q.new_empty(shape)]


def sliding_window_attention_native(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None,
                                    scale: float) -> torch.Tensor:
    """Sliding-window attention by the compiled kernels: blocks of queries against only their band
    of keys, BLAS gemms, the softmax in cache; queries end-aligned. Where they cannot be built or
    LAYERZOO_NATIVE=0, the chunkwise backend.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq >= 1, window None (every key)
    or >= 1. Returns (B, Tq, H, D) in q's dtype; differentiable in q, k and v.
    """
    ops = native_ops_for(q)
    if ops is None:
        return sliding_window_attention_chunkwise(q, k, v, window, scale)
    window = k.shape[1] if window is None else window
    return _NativeSlidingWindow.apply(q, k, v, ops, min(window, k.shape[1]), scale)


def _rows(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """t in dtype with unit feature stride and rows no closer than a row apart, as the kernels read
    it: a copy only where t is not so already (an expanded gradient, a cast)."""
    t = t.to(dtype)
    return t if t.stride(-1) == 1 and t.stride(1) >= t.shape[-1] else t.contiguous()


class _NativeSlidingWindow(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, ops, window, scale):
        dtype = compute_dtype(q.dtype)
        inputs = [_rows(t, dtype) for t in (q, k, v)]
        out, lse = ops.sliding_window_forward(*inputs, window, scale, block_size(window))
        ctx.save_for_backward(*inputs, out, lse)
        ctx.ops, ctx.window, ctx.scale = ops, window, scale
        ctx.dtypes = [t.dtype for t in (q, k, v)]
        return out.to(q.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = ctx.ops.sliding_window_backward(
            q, k, v, out, lse, _rows(d_out, q.dtype), ctx.window, ctx.scale, block_size(ctx.window))
        batch, k_len, kv_heads, dim = k.shape
        # per query head: the heads of a group share their kv head's gradient
        dk, dv = (t.view(batch, k_len, kv_heads, -1, dim).sum(3) for t in (dk, dv))
        return *(grad.to(dtype) for grad, dtype in zip((dq, dk, dv), ctx.dtypes)), None, None, None


COMPILED = compiled_ops("sliding_window", SOURCES, [HERE / "cpu_common.h", HERE.parent / "common" / "native_common.h"],
                        "sliding-window attention", _register_for_tracing, FLAGS)
# native_ops_for(t): torch.ops.layerzoo where the compiled ops run on t (CPU, not turned off), else
# None; native_enabled(), load_native_ops(): see CompiledOps.
native_ops_for, native_enabled, load_native_ops = COMPILED.ops_for, COMPILED.enabled, COMPILED.load
