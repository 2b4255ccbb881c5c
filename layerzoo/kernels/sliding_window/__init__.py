"""Sliding-window (local causal) attention with interchangeable backends.

Layout follows flash-linear-attention: q (B, Tq, H, D), k and v (B, Tk, Hkv, D). Queries are
aligned to the end of the keys (flash-attn's bottom-right convention), so streaming passes
keys = [cached keys; new keys] and queries = the new tokens only.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F

from ..common import check_tensors, choose_backend, empty_output, has_tokens
from ..triton_support import require_triton, triton_can_run
from .chunkwise import first_reachable_key, sliding_window_attention_chunkwise
from .triton.config import TRITON_DTYPES
from .reference import sliding_window_attention_reference, sliding_window_mask

__all__ = [
    "BACKENDS",
    "choose_swa_backend",
    "sliding_window_attention",
    "sliding_window_attention_reference",
    "sliding_window_mask",
]

# Every backend: (q, k, v, window, scale) -> out, with validated inputs, B, Tq >= 1, window None
# or < Tk.
Backend = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, "int | None", float], torch.Tensor]


def _sdpa(q, k, v, window, scale):
    """torch SDPA with a dense (Tq, Tk) boolean mask, or its causal kernel when there is no window.

    is_causal=True is top-left aligned, so it serves only Tq == Tk; unwindowed Tq < Tk (chunked
    prefill, decode) gets the explicit mask, which works with enable_gqa on every device.
    """
    if window is not None:
        # Decode-sized calls stay O(window) whatever the cache length.
        first = first_reachable_key(q.shape[1], k.shape[1], window)
        k, v = k[:, first:], v[:, first:]
    q_len, k_len = q.shape[1], k.shape[1]
    causal = window is None and q_len == k_len
    mask = None if causal else sliding_window_mask(q_len, k_len, window, device=q.device)
    out = F.scaled_dot_product_attention(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        attn_mask=mask,
        is_causal=causal,
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2)


def _chunkwise(q, k, v, window, scale):
    # Without a window every key is in reach and chunking saves nothing: O(Tq * Tk) like dense.
    window = k.shape[1] if window is None else window
    return sliding_window_attention_chunkwise(q, k, v, window, scale)


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    # Uncompiled flex_attention materialises every score; compiling is what makes it fast.
    return torch.compile(flex_attention)


@functools.lru_cache(maxsize=64)
def _flex_block_mask(q_len: int, k_len: int, window: int | None, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    offset = k_len - q_len

    def mask_mod(b, h, q_idx, kv_idx):
        lag = q_idx + offset - kv_idx
        return (lag >= 0) & (lag < window) if window is not None else lag >= 0

    return create_block_mask(mask_mod, None, None, q_len, k_len, device=device)


def _flex(q, k, v, window, scale):
    """flex_attention with a block mask, so key blocks outside the window are skipped entirely."""
    out = _compiled_flex_attention()(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        block_mask=_flex_block_mask(q.shape[1], k.shape[1], window, q.device),
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2)


def _triton(q, k, v, window, scale):
    """Flash-attention-2 style Triton kernels that visit only in-window key blocks (triton/).

    choose_swa_backend has checked device and dtype, so importing triton here is safe."""
    # Imported on first use: Triton reads TRITON_INTERPRET when the kernels are decorated.
    from .triton.function import sliding_window_attention_triton

    return sliding_window_attention_triton(q, k, v, window, scale)


BACKENDS: dict[str, Backend] = {
    "reference": sliding_window_attention_reference,
    "chunkwise": _chunkwise,
    "sdpa": _sdpa,
    "flex": _flex,
    "triton": _triton,
}

# flex_attention compiles per shape and needs a block mask per (Tq, Tk), which streaming decode
# (Tq = 1, Tk growing) would pay every step; SDPA on the trimmed keys is O(window) there anyway.
# The Triton kernel takes flex's place above the same threshold: below it a query block is mostly
# padding and the autotuner would key a new config per decode shape for little gain.
FLEX_MIN_QUERIES = 128


def _check_window(window: int | None) -> None:
    if window is None:
        return
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(
            f"sliding_window_attention: window must be an int >= 1 or None (unbounded), "
            f"got {window!r}"
        )


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
    sizes = check_tensors("sliding_window_attention", {
        "q": (q, "B Tq H D"), "k": (k, "B Tk Hkv D"), "v": (v, "B Tk Hkv D"),
    }, same_dtype=("q", "k", "v"))
    heads, kv_heads, q_len, k_len = sizes["H"], sizes["Hkv"], sizes["Tq"], sizes["Tk"]
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(
            f"sliding_window_attention: query heads ({heads}) must be a multiple of key/value heads ({kv_heads})"
        )
    if k_len < q_len:
        raise ValueError(
            f"sliding_window_attention: fewer keys than queries ({k_len} < {q_len}); queries align to the last keys"
        )


def choose_swa_backend(
    q: torch.Tensor, k: torch.Tensor, window: int | None, backend: str = "auto"
) -> str:
    """The backend `sliding_window_attention(q, k, v, window, backend=backend)` runs.

    "auto" picks: "sdpa" (fused causal kernel) when the window covers all Tk keys; otherwise, on
    CUDA with at least FLEX_MIN_QUERIES queries, "triton" (or "flex" when triton is missing or
    the dtype is fp64), "sdpa" on CUDA for fewer queries, and "chunkwise" elsewhere (also under
    TRITON_INTERPRET, where the interpreted kernels are far slower than torch's CPU SDPA).
    Raises ValueError for an unknown name or a backend the device or dtype cannot run.
    """
    _check_window(window)
    name = choose_backend("sliding-window attention backend", backend, BACKENDS, _fast_backend(q, k, window))
    if name == "flex" and not q.is_cuda:
        raise ValueError(
            f"the 'flex' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA"
        )
    if name == "triton":
        require_triton(q, "sliding_window_attention", TRITON_DTYPES)
    return name


def _fast_backend(q: torch.Tensor, k: torch.Tensor, window: int | None) -> str:
    """What "auto" runs; see choose_swa_backend."""
    if window is None or window >= k.shape[1]:
        return "sdpa"
    if q.is_cuda:
        if q.shape[1] < FLEX_MIN_QUERIES:
            return "sdpa"
        return "triton" if triton_can_run(q) and q.dtype in TRITON_DTYPES else "flex"
    return "chunkwise"


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    *,
    scale: float | None = None,
    backend: str = "auto",
) -> torch.Tensor:
    """Causal attention over the last `window` keys (itself included), queries end-aligned.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D) with H % Hkv == 0 (query head h reads kv head
    h // (H // Hkv)) and Tk >= Tq. Query i sits at key position p = Tk - Tq + i and attends keys s
    with p - window < s <= p: flash-attn's window_size=(window - 1, 0) with bottom-right causal.
    window=None (or window >= Tk) is full causal attention. scale defaults to D ** -0.5.

    Returns (B, Tq, H, D) in q's dtype; bf16/fp16 softmax accumulates in fp32. Any B, Tq >= 0.
    Differentiable in q, k and v on every backend. `backend` is "auto" (see choose_swa_backend)
    or a key of BACKENDS.
    """
    _check_inputs(q, k, v)
    name = choose_swa_backend(q, k, window, backend)
    if window is not None and window >= k.shape[1]:
        window = None
    if not has_tokens(q):
        return empty_output(q, v.shape[-1])
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    return BACKENDS[name](q, k, v, window, scale)
