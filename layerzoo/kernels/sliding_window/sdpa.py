"""The "sdpa" backend: torch's scaled_dot_product_attention with a dense boolean mask."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .band import first_reachable_key
from .reference import packed_window_mask, sliding_window_mask
from .sinks import with_sink_key


def sliding_window_attention_sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None, scale: float,
                                  *, bounds: tuple[list[int], list[int]] | None = None,
                                  sinks: torch.Tensor | None = None) -> torch.Tensor:
    """torch SDPA with a dense (Tq, Tk) boolean mask, or its causal kernel when there is no window.

    is_causal=True is top-left aligned, so it serves only Tq == Tk; unwindowed Tq < Tk (chunked
    prefill, decode) gets the explicit mask, which works with enable_gqa on every device. Packed
    sequences (bounds: the offsets of their queries and keys, B = 1) get the dense block-diagonal
    mask. Sinks take one more key (sinks.py), so no fused causal kernel then.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq >= 1; window None or >= 1.
    Returns (B, Tq, H, D) in q's dtype.
    """
    if window is not None and bounds is None:
        # Decode-sized calls stay O(window) whatever the cache length.
        first = first_reachable_key(q.shape[1], k.shape[1], window)
        k, v = k[:, first:], v[:, first:]
    q_len, k_len = q.shape[1], k.shape[1]
    if q_len == 1 and bounds is None and sinks is None:
        return _one_query(q, k, v, scale)
    causal = window is None and q_len == k_len and bounds is None and sinks is None
    if causal:
        mask = None
    elif bounds is None:
        mask = sliding_window_mask(q_len, k_len, window, device=q.device)
    else:
        mask = packed_window_mask(*bounds, window, device=q.device)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if sinks is not None:
        q, k, v, mask = with_sink_key(q, k, v, mask, sinks, scale)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
    return out.transpose(1, 2)


def _one_query(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, scale: float) -> torch.Tensor:
    """A decoding step's attention, q (B, 1, H, D) over every key of k, v (B, Tk, Hkv, D): each kv
    head's query heads become query rows of one unmasked call: no mask to build, and the keys
    are read once per kv head rather than per query head."""
    batch, _, heads, dim = q.shape
    rows = q.reshape(batch, k.shape[2], heads // k.shape[2], dim)  # head h reads kv head h // group
    out = F.scaled_dot_product_attention(rows, k.transpose(1, 2), v.transpose(1, 2), scale=scale)
    return out.reshape(batch, 1, heads, dim)
