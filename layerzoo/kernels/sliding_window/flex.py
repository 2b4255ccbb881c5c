"""The "flex" backend: torch's flex_attention with a block mask, so key blocks outside the window
(or another packed sequence) are skipped entirely."""

from __future__ import annotations

import functools

import torch

from .reference import packed_positions


def sliding_window_attention_flex(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None, scale: float,
                                  *, bounds: tuple[list[int], list[int]] | None = None) -> torch.Tensor:
    """flex_attention over the window's block mask, or over packed sequences' (bounds: the offsets
    of their queries and keys, B = 1). q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0,
    Tk >= Tq >= 1; window None or >= 1. Returns (B, Tq, H, D) in q's dtype."""
    if bounds is None:
        block_mask = _flex_block_mask(q.shape[1], k.shape[1], window, q.device)
    else:
        block_mask = _flex_packed_block_mask(*bounds, window, q.device)
    out = _compiled_flex_attention()(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        block_mask=block_mask,
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2)


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


def _flex_packed_block_mask(bounds_q: list[int], bounds_k: list[int], window: int | None, device: torch.device):
    """The block mask of packed sequences: a document mask on top of the window. Built per call
    (the offsets change from batch to batch), as flex_attention's document masking does."""
    from torch.nn.attention.flex_attention import create_block_mask

    sequence_q, sequence_k, position = packed_positions(bounds_q, bounds_k, device)

    def mask_mod(b, h, q_idx, kv_idx):
        lag = position[q_idx] - kv_idx
        visible = (sequence_q[q_idx] == sequence_k[kv_idx]) & (lag >= 0)
        return visible & (lag < window) if window is not None else visible

    return create_block_mask(mask_mod, None, None, bounds_q[-1], bounds_k[-1], device=device)
