"""The "chunkwise" backend: sliding-window attention in plain PyTorch, O(T * window) time and memory.

Queries are cut into chunks of `c` rows (band.chunk_size). With keys laid out on the same grid, a
query chunk only needs its own key chunk and the `m = ceil((window - 1) / c)` chunks before it, so
each chunk does a small dense (c, (m + 1) * c) attention and the work is O(Tq * (window + c))
instead of O(Tq * Tk). All chunks run as one batched F.scaled_dot_product_attention call (torch's
fused CPU kernel).

Packed sequences with a key per query (cu_seqlens_k = cu_seqlens, the training case) keep this
grid: each token's sequence rides along the keys, and the mask also requires the same sequence.
Other packed sequences (a decode step of many streams, each after its own cache) go on a grid of
chunks that each lie in one sequence (packed.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .band import chunk_size, first_reachable_key
from .packed import sliding_window_attention_packed
from .reference import packed_positions
from .sinks import with_sink_key


def sliding_window_attention_chunkwise(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None, scale: float, *,
    bounds: tuple[list[int], list[int]] | None = None, sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sliding-window attention by chunks: with the sequence of each token in the mask when every
    packed sequence has a key per query (training: no padding, no gathering), else packed.py.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq >= 1; window None (every key in
    reach: chunking saves nothing, O(Tq * Tk) like dense) or >= 1. bounds: None, or the offsets of
    the queries and of the keys of packed sequences (B = 1); sinks: None, or (H,) logits joining
    every softmax denominator of their head (sinks.py). Returns (B, Tq, H, D) in q's dtype.
    """
    if bounds is not None and bounds[0] != bounds[1]:
        return sliding_window_attention_packed(q, k, v, window, scale, *bounds, sinks)
    sequences = None if bounds is None else packed_positions(*bounds, q.device)[1]
    return _in_chunks(q, k, v, k.shape[1] if window is None else window, scale, sequences, sinks)


def _in_chunks(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int, scale: float,
    sequences: torch.Tensor | None = None, sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sliding-window attention, queries aligned to the end of the keys.

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq, 1 <= window.
    sequences: None, or for packed sequences with Tq == Tk (B = 1) the sequence of each token
    (Tk,) int64: a query then sees only its own sequence's keys.
    sinks: None, or (H,) logits joining every softmax denominator of their head (sinks.py).
    Returns (B, Tq, H, D) in q's dtype. Softmax accumulates in fp32 inside SDPA.
    """
    batch, q_len, heads, dim = q.shape
    kv_heads = k.shape[2]
    window = min(window, k.shape[1])
    first = first_reachable_key(q_len, k.shape[1], window)
    k, v = k[:, first:], v[:, first:]
    k_len = k.shape[1]

    c = min(chunk_size(window), q_len)
    n_chunks = -(-q_len // c)
    m = -(-(window - 1) // c)
    span = (m + 1) * c
    # Left-pad so the last query and the last key both end the grid. Query chunk j then covers
    # padded key positions [(j + m) * c, (j + m + 1) * c) and reads keys [j * c, j * c + span).
    q_pad = n_chunks * c - q_len
    k_pad = (n_chunks + m) * c - k_len

    qb = F.pad(q, (0, 0, 0, 0, q_pad, 0)).view(batch * n_chunks, c, heads, dim).transpose(1, 2)

    def key_chunks(t: torch.Tensor) -> torch.Tensor:
        # unfold gives overlapping (B, N, Hkv, D, span) views of the N chunks; the reshape copies
        # them into the (B * N, Hkv, span, D) batch SDPA takes.
        t = F.pad(t, (0, 0, 0, 0, k_pad, 0)).unfold(1, span, c)
        return t.permute(0, 1, 2, 4, 3).reshape(batch * n_chunks, kv_heads, span, dim)

    kb, vb = key_chunks(k), key_chunks(v)

    row = torch.arange(c, device=q.device)[:, None]
    col = torch.arange(span, device=q.device)[None, :]
    lag = m * c + row - col  # query position minus key position, the same in every chunk
    band = (lag >= 0) & (lag < window)
    key_pos = torch.arange(n_chunks, device=q.device)[:, None, None] * c + col
    # Padding keys are masked out, but a padding query row would then see nothing and SDPA would
    # return NaN for it (and its gradient); letting every row see its own diagonal key avoids that
    # and changes no real row, whose diagonal key is always real.
    visible = key_pos >= k_pad
    if sequences is not None:
        # padded like the keys, with an id no sequence has; the queries' are the last keys'
        ids = F.pad(sequences[first:], (k_pad, 0), value=-1)
        visible = visible & (ids.unfold(0, span, c)[:, None, :] == ids[m * c:].view(n_chunks, c)[:, :, None])
    mask = band & (visible | (lag == 0))
    mask = mask.expand(batch, n_chunks, c, span).reshape(batch * n_chunks, 1, c, span)
    if sinks is not None:
        qb, kb, vb, mask = with_sink_key(qb, kb, vb, mask, sinks, scale)

    out = F.scaled_dot_product_attention(
        qb, kb, vb, attn_mask=mask, scale=scale, enable_gqa=heads != kv_heads
    )
    out = out.transpose(1, 2).reshape(batch, n_chunks * c, heads, dim)
    return out[:, q_pad:]
