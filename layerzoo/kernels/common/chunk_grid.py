"""Packed sequences laid out on a grid of chunks, every sequence starting a chunk of its own.

A chunked kernel over packed sequences (cu_seqlens) must never let one chunk hold the end of a
sequence and the start of the next: its in-chunk work (masked (L, L) products, cumulative gates)
would mix them. On this grid each chunk lies inside one sequence, so the in-chunk work stays one
batched computation over every chunk of every sequence, and only what crosses chunks (a
recurrence's carried state, attention's earlier keys) needs to know where sequences start. The
cost is the padding of each sequence's last chunk: fewer than `chunk` slots per sequence.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ChunkGrid:
    """Where the tokens of packed sequences sit on a grid of chunks of `chunk` slots.

    source: (n_chunks * chunk,) int64, the packed index of the token in each slot; T (one past the
        last token) for padding slots. slots: (T,) int64, the slot of each packed token.
    first_chunks: N + 1 offsets; sequence s owns chunks [first_chunks[s], first_chunks[s + 1]),
        none when it is empty.
    """

    chunk: int
    source: torch.Tensor
    slots: torch.Tensor
    first_chunks: list[int]

    @classmethod
    def build(cls, bounds: list[int], chunk: int, device: torch.device) -> ChunkGrid:
        """The grid for sequences at offsets `bounds` (cu_seqlens as ints) in chunks of `chunk`."""
        starts = torch.tensor(bounds[:-1])
        lengths = torch.tensor(bounds[1:]) - starts
        counts = (lengths + chunk - 1) // chunk
        first_chunks = [0, *counts.cumsum(0).tolist()]
        sequence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        total = bounds[-1]
        slots = torch.tensor(first_chunks[:-1])[sequence] * chunk + torch.arange(total) - starts[sequence]
        source = torch.full((first_chunks[-1] * chunk,), total, dtype=torch.int64)
        source[slots] = torch.arange(total)
        return cls(chunk, source.to(device), slots.to(device), first_chunks)

    @property
    def n_chunks(self) -> int:
        return self.first_chunks[-1]

    def spread(self, t: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """t (1, T, ...) laid out on the grid: (1, n_chunks * chunk, ...), padding slots `fill`."""
        padded = torch.cat((t, t.new_full((1, 1, *t.shape[2:]), fill)), dim=1)
        return padded.index_select(1, self.source)

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """The tokens of a grid tensor (1, n_chunks * chunk, ...) back in packed order: (1, T, ...)."""
        return t.index_select(1, self.slots)
