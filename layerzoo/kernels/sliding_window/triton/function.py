"""Launchers and the autograd Function tying the forward and backward kernels together.

Tensors stay in the public (B, T, heads, D) layout: every kernel takes all four strides of every
tensor, so nothing is transposed or copied (non-contiguous views and expanded gradients work).
Saved for backward: q, k, v, out and the fp32 log2-domain lse (B, H, Tq).
"""

from __future__ import annotations

import contextlib
import functools

import torch
import triton

from ...common.backends import require_triton, triton_interpreting
from ..band import first_reachable_key
from .backward import swa_bwd_delta_kernel, swa_bwd_dkdv_kernel, swa_bwd_dq_kernel
from .common import LOG2E
from .config import DELTA_CONFIG, GPU_CONFIGS, INTERPRETER_CONFIGS, KERNELS, TRITON_DTYPES, TileConfig, tune_bucket
from .forward import swa_fwd_kernel

_KERNELS = {"fwd": swa_fwd_kernel, "dkdv": swa_bwd_dkdv_kernel, "dq": swa_bwd_dq_kernel}


@functools.cache
def _autotuned(name: str):
    """The kernel wrapped in triton.autotune over GPU_CONFIGS[name] (built on first GPU use)."""
    configs = [
        triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n},
                      num_warps=c.num_warps, num_stages=c.num_stages)
        for c in GPU_CONFIGS[name]
    ]
    return triton.autotune(configs=configs, key=["BLOCK_D", "tune_key"])(_KERNELS[name])


def _launch(name: str, grid, args: tuple, meta: dict, blocks: dict | None) -> None:
    """Run kernel `name`: the fixed config from `blocks` or the interpreter, else the autotuner.

    grid maps {"BLOCK_M", "BLOCK_N"} to the launch grid, so it follows whichever tiles run.
    """
    fixed = (blocks or {}).get(name)
    if fixed is None and triton_interpreting():
        fixed = INTERPRETER_CONFIGS[name]
    if fixed is None:
        _autotuned(name)[grid](*args, **meta)
        return
    fixed = TileConfig(*fixed)
    tiles = {"BLOCK_M": fixed.block_m, "BLOCK_N": fixed.block_n}
    _KERNELS[name][grid(tiles)](*args, **tiles, **meta,
                                num_warps=fixed.num_warps, num_stages=fixed.num_stages)


def _strides(t: torch.Tensor) -> tuple[int, int, int, int]:
    return tuple(t.stride())


def _common_meta(q: torch.Tensor, group: int) -> dict:
    dim = q.shape[-1]
    block_d = max(16, triton.next_power_of_2(dim))
    return {
        "GROUP": group,
        "BLOCK_D": block_d,
        "EVEN_D": block_d == dim,
        "PRECISION": _fp32_precision() if q.dtype == torch.float32 else "tf32",
        "UPCAST": triton_interpreting() and q.dtype == torch.bfloat16,
    }


def _fp32_precision() -> str:
    """fp32 dots: "tf32x3" on GPU (three TF32 products, about fp32 accuracy on tensor cores).

    "ieee" runs on CUDA cores and spills registers heavily at D = 128 on sm_90, which also makes
    every autotuning config take minutes to compile. The interpreter computes exactly either way.
    """
    return "ieee" if triton_interpreting() else "tf32x3"


def _device_guard(t: torch.Tensor):
    # Triton launches on the current CUDA device; make it the tensors' one.
    return torch.cuda.device(t.device) if t.is_cuda else contextlib.nullcontext()


def _forward(q, k, v, window: int, scale: float, blocks: dict | None):
    """out (B, Tq, H, D) in q's dtype and lse (B, H, Tq) fp32; window is an int <= Tk."""
    batch, q_len, heads, dim = q.shape
    k_len, kv_heads = k.shape[1], k.shape[2]
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(batch, heads, q_len, device=q.device, dtype=torch.float32)
    args = (q, k, v, out, lse, *_strides(q), *_strides(k), *_strides(v), *_strides(out),
            heads, q_len, k_len, window, dim, scale * LOG2E, tune_bucket(window))
    grid = lambda meta: (triton.cdiv(q_len, meta["BLOCK_M"]), batch * heads)  # noqa: E731
    with _device_guard(q):
        _launch("fwd", grid, args, _common_meta(q, heads // kv_heads), blocks)
    return out, lse


def _backward(q, k, v, out, lse, grad_out, window: int, scale: float, blocks: dict | None):
    """(dq, dk, dv) in the inputs' dtype; dk, dv of kv head j sum over its group's query heads."""
    batch, q_len, heads, dim = q.shape
    k_len, kv_heads = k.shape[1], k.shape[2]
    meta = _common_meta(q, heads // kv_heads)
    delta = torch.empty_like(lse)
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dv = torch.empty_like(v, memory_format=torch.contiguous_format)
    # Keys older than every window get no gradient and no program; zero them here. The kernel
    # starts at the block holding first_key and rewrites (as zeros) any of these it covers.
    first_key = first_reachable_key(q_len, k_len, window)
    dk[:, :first_key].zero_()
    dv[:, :first_key].zero_()
    tune_key = tune_bucket(window)
    with _device_guard(q):
        c = DELTA_CONFIG
        swa_bwd_delta_kernel[(triton.cdiv(q_len, c.block_m), batch * heads)](
            out, grad_out, delta, *_strides(out), *_strides(grad_out), heads, q_len, dim,
            BLOCK_M=c.block_m, BLOCK_D=meta["BLOCK_D"], EVEN_D=meta["EVEN_D"],
            num_warps=c.num_warps, num_stages=c.num_stages)

        kv_args = (q, k, v, grad_out, dk, dv, lse, delta, *_strides(q), *_strides(k),
                   *_strides(v), *_strides(grad_out), *_strides(dk), *_strides(dv),
                   heads, kv_heads, q_len, k_len, window, dim, first_key, scale, scale * LOG2E,
                   tune_key)

        def kv_grid(tiles):
            key_start = first_key // tiles["BLOCK_N"] * tiles["BLOCK_N"]
            return (triton.cdiv(k_len - key_start, tiles["BLOCK_N"]), batch * kv_heads)

        _launch("dkdv", kv_grid, kv_args, meta, blocks)

        q_args = (q, k, v, grad_out, dq, lse, delta, *_strides(q), *_strides(k), *_strides(v),
                  *_strides(grad_out), *_strides(dq), heads, q_len, k_len, window, dim,
                  scale, scale * LOG2E, tune_key)
        q_grid = lambda tiles: (triton.cdiv(q_len, tiles["BLOCK_M"]), batch * heads)  # noqa: E731
        _launch("dq", q_grid, q_args, meta, blocks)
    return dq, dk, dv


class SlidingWindowAttentionFunction(torch.autograd.Function):
    """Autograd glue: forward saves (q, k, v, out, lse); backward runs delta, dK/dV and dQ."""

    @staticmethod
    def forward(ctx, q, k, v, window, scale, blocks):
        out, lse = _forward(q, k, v, window, scale, blocks)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.window, ctx.scale, ctx.blocks = window, scale, blocks
        return out

    @staticmethod
    def backward(ctx, grad_out):
        q, k, v, out, lse = ctx.saved_tensors
        dq, dk, dv = _backward(q, k, v, out, lse, grad_out, ctx.window, ctx.scale, ctx.blocks)
        return dq, dk, dv, None, None, None


def sliding_window_attention_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    scale: float | None = None,
    *,
    blocks: dict | None = None,
) -> torch.Tensor:
    """Sliding-window attention with the Triton kernels; differentiable in q, k and v.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq >= 1, one dtype among
    float32, bfloat16, float16, on CUDA (or CPU under TRITON_INTERPRET=1). Queries are end-aligned
    and see keys p - window < s <= p; window None is full causal. scale defaults to D ** -0.5.
    Returns (B, Tq, H, D) in q's dtype. Only device and dtype are checked (one-line ValueError);
    the public sliding_window_attention(..., backend="triton") validates shapes too.

    blocks optionally fixes the tiles per kernel instead of autotuning, e.g.
    {"fwd": (128, 64, 8, 3), "dkdv": (32, 128), "dq": (64, 64)} as TileConfig fields
    (block_m, block_n[, num_warps, num_stages]); kernels it omits use the default.
    """
    require_triton(q, "sliding_window_attention", TRITON_DTYPES)
    unknown = set(blocks or {}) - set(KERNELS)
    if unknown:
        raise ValueError(
            f"sliding_window_attention: blocks keys must be among {KERNELS}, got {sorted(unknown)}"
        )
    k_len = k.shape[1]
    window = k_len if window is None else min(window, k_len)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return SlidingWindowAttentionFunction.apply(q, k, v, window, scale, blocks)
