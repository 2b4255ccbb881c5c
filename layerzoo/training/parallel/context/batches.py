"""A task batch cut to this rank's piece: the rows' pieces, or the piece of the packed row."""

from __future__ import annotations

from ....tasks import Batch
from .group import ContextGroup
from .pieces import Pieces


def piece_of(batch: Batch, group: ContextGroup, segment_size: int | None = None) -> tuple[Batch, Pieces]:
    """(this rank's piece of `batch`, the split): rows (B, T) -> (B, T_piece); packed examples
    (cu_seqlens over the flattened rows) -> one packed row (1, T_piece) with this piece's offsets.
    segment_size: an ARMT's, whose pieces hold whole segments (None: any model's even split)."""
    if batch.cu_seqlens is None:
        pieces = Pieces.split(group, batch.input_ids.shape[1], segment_size=segment_size)
        return Batch(pieces.slice(batch.input_ids), pieces.slice(batch.targets)), pieces
    ids, targets = batch.input_ids.reshape(1, -1), batch.targets.reshape(1, -1)
    pieces = Pieces.split(group, ids.shape[1], batch.cu_seqlens, segment_size)
    return Batch(pieces.slice(ids), pieces.slice(targets), pieces.local_cu_seqlens(ids.device)), pieces
