"""Attention weights in transformers' layout, (B, H, T, keys), from what a layer records: its
rows' tensor as it is, or one tensor per packed sequence (a padded batch, sequences packed by
position_ids, a ragged cache) placed back where its tokens sit, zeros elsewhere.
"""

from __future__ import annotations

import torch

from ..blocks.packing import Packing


def attention_rows(weights: torch.Tensor | list[torch.Tensor], index: torch.Tensor, cu_seqlens: torch.Tensor,
                   shape: tuple[int, int]) -> torch.Tensor:
    """(B, H, T, L + T) weights: queries at their own columns; keys the cache's kept ones
    right-aligned in the first L columns (L: the longest history kept), then the T columns of
    this call. Padding's rows and columns, and keys of other packed sequences, are zero.

    Args:
        weights: (B, H, T, keys) as recorded for plain rows (returned as is), or N tensors
            (H, q_n, cached_n + q_n), sequence n's.
        index: (total,) where each packed token sits in the rows flattened (B * T).
        cu_seqlens: (N + 1,) offsets of the sequences in index.
        shape: (B, T).
    """
    if isinstance(weights, torch.Tensor):
        return weights
    batch, length = shape
    starts, ends = cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist()
    cached = [sequence.shape[-1] - sequence.shape[-2] for sequence in weights]
    history = max(cached, default=0)
    rows = weights[0].new_zeros(batch, weights[0].shape[0], length, history + length)
    for sequence, start, end, kept in zip(weights, starts, ends, cached):
        tokens = index[start:end]
        row, columns = tokens // length, tokens % length
        if len(tokens):
            keys = torch.cat((torch.arange(history - kept, history, device=columns.device), history + columns))
            rows[int(row[0])][:, columns[:, None], keys[None, :]] = sequence
    return rows


def token_layout(mask: torch.Tensor | None, packed: torch.Tensor | None, shape: tuple[int, int],
                 device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(index, cu_seqlens) of the sequences a call ran, for attention_rows: the real tokens of a
    padded batch (mask (B, T)), the sequences position_ids packed (their offsets), else each row."""
    batch, length = shape
    if mask is not None:
        packing = Packing.from_mask(mask, shape)
        return packing.index, packing.cu_seqlens
    every = torch.arange(batch * length, device=device)
    return every, packed if packed is not None else torch.arange(0, batch * length + 1, max(length, 1), device=device)
