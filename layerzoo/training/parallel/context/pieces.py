"""Where each rank's piece of the sequences lies: the split of T tokens into K contiguous pieces,
and what each piece continues (packed sequences' boundaries may fall anywhere, across ranks too;
ARMT's pieces are whole segments)."""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass

import torch

from .errors import ContextError
from .group import ContextGroup


@dataclass(frozen=True)
class Pieces:
    """Rows of T tokens split into K contiguous pieces, rank j holding [starts[j], starts[j + 1]).

    Attributes:
        group: the context group.
        length: T, the tokens of every row (the whole packed row with cu_seqlens).
        boundaries: the sorted global offsets where sequences start or end, (0, ..., T); (0, T)
            for rows without cu_seqlens (each row one sequence).
        packed: whether the rows are packed sequences (cu_seqlens, one row).
        cuts: (0, start of rank 1, ..., T) where the pieces were placed on segment edges; None:
            rank j starts at T j // K.
    """

    group: ContextGroup
    length: int
    boundaries: tuple[int, ...]
    packed: bool
    cuts: tuple[int, ...] | None = None

    @classmethod
    def split(cls, group: ContextGroup, length: int, cu_seqlens: torch.Tensor | None = None,
              segment_size: int | None = None) -> Pieces:
        """The pieces of rows of `length` tokens (or of one row packing the sequences at the
        global offsets cu_seqlens), as even as whole tokens allow; with segment_size (ARMT), as
        even as whole segments allow, each sequence's segments counted from its first token.

        Raises:
            ContextError: cu_seqlens not running from 0 to length; fewer tokens than ranks, so
                some piece would be empty; with segment_size, fewer segments than ranks.
        """
        offsets = (0, length)
        if cu_seqlens is not None:
            offsets = tuple(sorted({int(c) for c in cu_seqlens.tolist()}))
            if offsets[0] != 0 or offsets[-1] != length:
                raise ContextError(f"cu_seqlens must run from 0 to the row's {length} tokens, got {offsets[0]}..{offsets[-1]}")
        if segment_size is not None:
            return cls(group, length, offsets, cu_seqlens is not None, _segment_cuts(group.size, offsets, segment_size))
        if length < group.size:
            raise ContextError(f"a sequence of {length} tokens cannot be split over a context of {group.size} ranks; "
                               f"it needs at least {group.size} tokens")
        return cls(group, length, offsets, cu_seqlens is not None)

    def start(self, rank: int) -> int:
        if self.cuts is not None:
            return self.cuts[rank]
        return self.length * rank // self.group.size

    def stop(self, rank: int) -> int:
        return self.start(rank + 1)

    def sequence_start(self, position: int) -> int:
        """The global offset where the sequence holding token `position` starts."""
        return self.boundaries[bisect.bisect_right(self.boundaries, position) - 1]

    def continues(self, rank: int) -> bool:
        """Whether rank's first token continues a sequence begun on an earlier rank."""
        return self.sequence_start(self.start(rank)) != self.start(rank)

    @property
    def lengths(self) -> list[int]:
        """Every rank's piece length, in rank order."""
        return [self.stop(rank) - self.start(rank) for rank in range(self.group.size)]

    def causal_work(self, rank: int) -> int:
        """The query-key pairs causal full attention scores on rank's piece: each token reads the
        keys of its sequence up to itself."""
        start, stop = self.start(rank), self.stop(rank)
        cuts = [start, *(b for b in self.boundaries if start < b < stop), stop]
        work = 0
        for first, last in itertools.pairwise(cuts):
            tokens, before = last - first, first - self.sequence_start(first)
            work += tokens * before + tokens * (tokens + 1) // 2
        return work

    def last_stream_start(self, rank: int) -> int:
        """The global offset where rank's last sequence (the one it hands on) starts in its piece."""
        return max(self.start(rank), self.sequence_start(self.stop(rank) - 1))

    def local_offsets(self, rank: int) -> list[int]:
        """cu_seqlens of rank's piece: [0, ..., its length], a boundary wherever a sequence starts."""
        start, stop = self.start(rank), self.stop(rank)
        return [0, *(b - start for b in self.boundaries if start < b < stop), stop - start]

    @property
    def mine(self) -> tuple[int, int]:
        """(start, stop) of this rank's piece."""
        return self.start(self.group.rank), self.stop(self.group.rank)

    def local_cu_seqlens(self, device=None) -> torch.Tensor | None:
        """This rank's cu_seqlens (int64), or None for rows without packing."""
        if not self.packed:
            return None
        return torch.tensor(self.local_offsets(self.group.rank), dtype=torch.int64, device=device)

    def slice(self, tensor: torch.Tensor, dim: int = 1) -> torch.Tensor:
        """This rank's piece of a (B, T, ...) tensor (dim 1: the tokens)."""
        start, stop = self.mine
        return tensor.narrow(dim, start, stop - start)


def _segment_cuts(size: int, offsets: tuple[int, ...], segment_size: int) -> tuple[int, ...]:
    """(0, ..., T): K pieces of whole segments, as many to each rank as an even split allows;
    a sequence's segments start at its first token and every segment_size tokens after it."""
    if not isinstance(segment_size, int) or segment_size < 1:
        raise ContextError(f"segment_size must be a positive integer, got {segment_size!r}")
    starts = [start for first, stop in itertools.pairwise(offsets) for start in range(first, stop, segment_size)]
    if len(starts) < size:
        raise ContextError(f"{offsets[-1]} tokens make {len(starts)} segments of {segment_size}, too few for a context "
                           f"of {size} ranks that each hold whole segments (at least one)")
    return (*(starts[len(starts) * rank // size] for rank in range(size)), offsets[-1])
