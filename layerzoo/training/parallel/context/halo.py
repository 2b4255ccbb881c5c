"""Halos: the last tokens of the sequence each rank hands on, and, from every rank's, those this
rank's first sequence reads before its piece (a piece shorter than the halo takes tokens from
several ranks back). Attention's keys and values, short convolutions' inputs."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .pieces import Pieces


def last_tokens(t: torch.Tensor, pieces: Pieces, keep: int) -> torch.Tensor:
    """t (B, T_piece, ...) -> (B, keep, ...): the last `keep` tokens of this rank's last
    sequence, right-aligned, zeros in front where it has fewer."""
    kept = min(keep, pieces.mine[1] - pieces.last_stream_start(pieces.group.rank))
    tail = t[:, t.shape[1] - kept:]
    return F.pad(tail, (0,) * (2 * (t.dim() - 2)) + (keep - kept, 0))


def before_piece(gathered: torch.Tensor, pieces: Pieces, keep: int, reach: int | None) -> torch.Tensor:
    """From every rank's last_tokens (K, B, keep, ...): the tokens of this rank's first sequence
    before its piece, at most `reach` of them (None: all), (B, n, ...), oldest first."""
    rank = pieces.group.rank
    start = pieces.start(rank)
    first = pieces.sequence_start(start)
    if reach is not None:
        first = max(first, start - reach)
    parts = [gathered[source][:, keep - (pieces.stop(source) - max(first, pieces.start(source))):]
             for source in range(rank) if max(first, pieces.start(source)) < pieces.stop(source)]
    return torch.cat(parts, dim=1) if parts else gathered[0][:, :0]


def left_filled(t: torch.Tensor, length: int) -> torch.Tensor:
    """t (B, n, ...) with zeros in front up to (B, length, ...): a short convolution's cache."""
    return F.pad(t, (0,) * (2 * (t.dim() - 2)) + (length - t.shape[1], 0))


def right_padded(t: torch.Tensor, length: int) -> torch.Tensor:
    """t (B, n, ...) with zeros after it up to (B, length, ...): equal shapes for an all-gather."""
    return F.pad(t, (0,) * (2 * (t.dim() - 2)) + (0, length - t.shape[1]))
