"""Chunkwise sliding-window attention over packed sequences (cu_seqlens): O(Tq * window) in PyTorch.

chunkwise.py lays queries and keys on one grid, which needs one offset between query and key
positions for the whole row. Packed sequences each have their own (a decode step of N streams:
one query per stream, each after its own cache), so here the queries go on a ChunkGrid (each
sequence from a chunk boundary) and every chunk gathers the keys it can reach, the same number
for each: its last query's key position and the `reach - 1 + c - 1` before it, with
reach = min(window, the longest key sequence). A chunk's rows then sit at one fixed lag from each
gathered column, so one (c, span) band serves every chunk; a per-chunk bound masks the keys of
earlier sequences. All chunks run as one batched F.scaled_dot_product_attention call.

The chunk is band.chunk_size(reach) rows, or fewer for short sequences: one row when every
sequence has a single query (decode), so the work is one window of keys per query.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.chunks import ChunkGrid
from .band import chunk_size
from .sinks import with_sink_key


def sliding_window_attention_packed(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None, scale: float,
    bounds_q: list[int], bounds_k: list[int], sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sliding-window attention within each packed sequence, its queries aligned to the end of
    its keys.

    q: (1, Tq, H, D); k, v: (1, Tk, Hkv, D), H % Hkv == 0; bounds_q, bounds_k: the offsets of each
    sequence's queries and keys (no sequence with more queries than keys); window None (all of a
    sequence's keys) or >= 1; sinks None or (H,) logits joining every softmax denominator of their
    head (sinks.py). Returns (1, Tq, H, D) in q's dtype; softmax accumulates in fp32
    inside SDPA. Inputs are not validated here.
    """
    heads, dim, kv_heads, key_len = q.shape[2], q.shape[3], k.shape[2], k.shape[1]
    q_lengths = [end - start for start, end in zip(bounds_q, bounds_q[1:])]
    k_lengths = [end - start for start, end in zip(bounds_k, bounds_k[1:])]
    reach = max(k_lengths) if window is None else min(window, max(k_lengths))
    c = min(chunk_size(reach), max(q_lengths))
    grid = ChunkGrid.build(bounds_q, c, q.device)
    span = c - 1 + reach

    # Per chunk: its sequence, its first row's key position, the first key of its sequence and how
    # many of its rows are queries (the rest pad the sequence's last chunk).
    counts = torch.tensor(grid.first_chunks[1:]) - torch.tensor(grid.first_chunks[:-1])
    sequence = torch.repeat_interleave(torch.arange(len(counts)), counts)
    rank = torch.arange(grid.n_chunks) - torch.tensor(grid.first_chunks[:-1])[sequence]
    q_len = torch.tensor(q_lengths)[sequence]
    first_position = torch.tensor(bounds_k[1:])[sequence] - q_len + rank * c
    real_rows = (q_len - rank * c).clamp(max=c)
    lowest_key = torch.tensor(bounds_k[:-1])[sequence]
    # Column j of a chunk holds key first_position - (reach - 1) + j; out-of-range indices are
    # clamped (to real, finite keys) and masked.
    key_index = first_position[:, None] - (reach - 1) + torch.arange(span)
    own_sequence = key_index >= lowest_key[:, None]
    key_index = key_index.clamp(0, key_len - 1).flatten().to(q.device)

    # Row r and column j are r + reach - 1 - j apart in every chunk: one band for all.
    lag = torch.arange(c)[:, None] + reach - 1 - torch.arange(span)[None, :]
    band = (lag >= 0) if window is None else (lag >= 0) & (lag < window)
    # A padding row sees every column: without any key SDPA would give it (and its gradient) NaN;
    # its output is dropped and its zero gradient adds nothing to k and v.
    padding = torch.arange(c)[None, :] >= real_rows[:, None]
    mask = (band[None] & own_sequence[:, None, :]) | padding[:, :, None]

    qb = grid.spread(q).view(grid.n_chunks, c, heads, dim).transpose(1, 2)

    def gathered(t: torch.Tensor) -> torch.Tensor:
        return t.index_select(1, key_index).view(grid.n_chunks, span, kv_heads, dim).transpose(1, 2)

    kb, vb, mask = gathered(k), gathered(v), mask[:, None].to(q.device)
    if sinks is not None:
        qb, kb, vb, mask = with_sink_key(qb, kb, vb, mask, sinks, scale)
    out = F.scaled_dot_product_attention(qb, kb, vb, attn_mask=mask, scale=scale, enable_gqa=heads != kv_heads)
    return grid.gather(out.transpose(1, 2).reshape(1, grid.n_chunks * c, heads, dim))
