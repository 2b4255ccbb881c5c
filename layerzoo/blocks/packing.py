"""Variable-length batches: a padded batch (B, T) and its real tokens packed into one row.

Kernels and mixers take sequences of different lengths packed into one row (B = 1) with
`cu_seqlens`, the offsets [0, l1, l1 + l2, ...] of flash-linear-attention and flash-attn. A
padded batch with an `attention_mask` of real tokens packs into such a row (each batch row one
sequence, an all-padding row an empty one) and its outputs unpack back, zeros at the padding. So
padding is never computed at all, and nothing in a kernel has to know about it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..kernels.common.checks import check_cu_seqlens


def lengths_of(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """(N + 1,) offsets -> (N,) lengths."""
    return cu_seqlens[1:] - cu_seqlens[:-1]


def offsets_of(lengths: torch.Tensor) -> torch.Tensor:
    """(N,) lengths -> (N + 1,) offsets [0, l1, l1 + l2, ...], int64."""
    return torch.nn.functional.pad(lengths.long().cumsum(0), (1, 0))


def sequence_ids(cu_seqlens: torch.Tensor) -> torch.Tensor:
    """(N + 1,) offsets -> (total,): the sequence each packed token belongs to."""
    lengths = lengths_of(cu_seqlens)
    return torch.repeat_interleave(torch.arange(len(lengths), device=cu_seqlens.device), lengths)


def positions_in_sequences(cu_seqlens: torch.Tensor, start: torch.Tensor | int = 0) -> torch.Tensor:
    """(total,) position of each packed token in its own sequence, counted from `start` (an int, or
    (N,) per sequence: the tokens each stream has seen before)."""
    ids = sequence_ids(cu_seqlens)
    positions = torch.arange(len(ids), device=cu_seqlens.device) - cu_seqlens[:-1].long()[ids]
    return positions + (start[ids] if isinstance(start, torch.Tensor) else start)


def last_of_rows(values: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """values (N, L, ...) holding lengths[n] <= L tokens at the end of row n -> those tokens packed
    (sum(lengths), ...), row by row."""
    kept = torch.arange(values.shape[1], device=values.device) >= values.shape[1] - lengths[:, None]
    return values[kept]


def concat_sequences(first: torch.Tensor, first_lengths: torch.Tensor, second: torch.Tensor,
                     second_lengths: torch.Tensor) -> torch.Tensor:
    """Two packings of N sequences, (sum(first_lengths), ...) and (sum(second_lengths), ...) ->
    one whose sequence n is first's n, then second's n: (sum of both lengths, ...)."""
    joined = offsets_of(first_lengths + second_lengths)
    merged = first.new_empty(first.shape[0] + second.shape[0], *first.shape[1:])
    for part, lengths, skip in ((first, first_lengths, 0), (second, second_lengths, first_lengths)):
        cu = offsets_of(lengths)
        ids = sequence_ids(cu)
        rank = torch.arange(part.shape[0], device=part.device) - cu[:-1][ids]
        start = joined[:-1] + skip
        merged = merged.index_copy(0, start[ids] + rank, part)
    return merged


def right_aligned(packed: torch.Tensor, lengths: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    """The last keep[n] tokens of each packed sequence n (lengths (N,)) in rows (N, max(keep), ...),
    at the end of their row, zeros in front: the layout of a cache of ragged histories."""
    width = int(keep.max()) if len(keep) else 0
    cu = offsets_of(lengths)
    ids = sequence_ids(cu)
    from_end = cu[1:][ids] - torch.arange(packed.shape[0], device=packed.device)  # 1 for the last token
    kept = from_end <= keep[ids]
    rows = packed.new_zeros(len(lengths) * width, *packed.shape[1:])
    return rows.index_copy(0, ids[kept] * width + width - from_end[kept], packed[kept]).unflatten(0, (len(lengths), width))


def check_packed(op: str, cu_seqlens: torch.Tensor, x: torch.Tensor) -> None:
    """A one-line ValueError "<op>: cu_seqlens ..." unless x (B, T, ...) is one row (B = 1) of
    packed sequences that cu_seqlens covers exactly (the kernels' own check)."""
    check_cu_seqlens(op, cu_seqlens, {"B": x.shape[0], "T": x.shape[1]}, x.device, rows=None)


@dataclass(frozen=True)
class Packing:
    """Where the real tokens of a padded batch (B, T) sit in one packed row (1, N).

    index: (N,) positions of the real tokens in the flattened batch (B * T), row by row in order.
    cu_seqlens: (B + 1,) offsets of each row's real tokens in the packed row (an empty sequence for
    a row without any). batch, length: B and T.
    """

    index: torch.Tensor
    cu_seqlens: torch.Tensor
    batch: int
    length: int

    @classmethod
    def from_mask(cls, attention_mask: torch.Tensor, shape: tuple[int, ...] | None = None) -> Packing:
        """attention_mask: (B, T) of 1 / True at real tokens and 0 / False at padding, in any
        place (left, right or between). shape: the (B, T) it must have, checked when given."""
        if not isinstance(attention_mask, torch.Tensor) or attention_mask.dim() != 2:
            raise ValueError("attention_mask must be a (batch, length) tensor of 0 and 1")
        if shape is not None and tuple(attention_mask.shape) != tuple(shape):
            raise ValueError(f"attention_mask must be {tuple(shape)}, the batch's (batch, length), "
                             f"got {tuple(attention_mask.shape)}")
        if attention_mask.dtype != torch.bool:
            if attention_mask.is_floating_point() or bool(((attention_mask != 0) & (attention_mask != 1)).any()):
                raise ValueError("attention_mask must hold only 0 (padding) and 1 (real tokens)")
            attention_mask = attention_mask.bool()
        batch, length = attention_mask.shape
        return cls(attention_mask.flatten().nonzero().squeeze(1), offsets_of(attention_mask.sum(1)), batch, length)

    def pack(self, x: torch.Tensor) -> torch.Tensor:
        """x (B, T, ...) -> its real tokens (1, N, ...)."""
        return x.flatten(0, 1).index_select(0, self.index)[None]

    def unpack(self, y: torch.Tensor) -> torch.Tensor:
        """y (1, N, ...) -> (B, T, ...), y's tokens where they came from and zeros at the padding."""
        flat = y.new_zeros(self.batch * self.length, *y.shape[2:]).index_copy(0, self.index, y[0])
        return flat.unflatten(0, (self.batch, self.length))
