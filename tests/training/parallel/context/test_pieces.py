"""Context parallelism in one process: the split of rows and packed sequences into pieces, and the
refusals that need no other process."""

import pytest
import torch
from hypothesis import given, settings, strategies as st

import layerzoo
from layerzoo.training.parallel.context import ContextError, ContextGroup, Pieces, context_parallel


def group(rank: int, size: int) -> ContextGroup:
    return ContextGroup(None, rank, size, tuple(range(size)))


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 5), lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_pieces_tile_the_row_and_keep_every_boundary(size, lengths):
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    total = int(offsets[-1])
    if total < size:
        with pytest.raises(ContextError, match="needs at least"):
            Pieces.split(group(0, size), total, offsets)
        return
    boundaries, covered = set(), []
    for rank in range(size):
        pieces = Pieces.split(group(rank, size), total, offsets)
        start, stop = pieces.mine
        covered.append((start, stop))
        local = pieces.local_cu_seqlens().tolist()
        assert local[0] == 0 and local[-1] == stop - start and stop > start
        boundaries |= {start + b for b in local}
        first_sequence_starts_here = start in offsets.tolist()
        assert pieces.continues(rank) == (not first_sequence_starts_here)
    assert [c[0] for c in covered] == [0, *(c[1] for c in covered[:-1])] and covered[-1][1] == total
    assert set(offsets.tolist()) <= boundaries


def test_an_armt_model_is_refused_in_one_line():
    spec = layerzoo.load_spec("armt-tiny")
    model = layerzoo.build(spec)
    with pytest.raises(ContextError, match="segments") as error:
        with context_parallel(model, Pieces.split(group(0, 2), 8)):
            pass
    assert "\n" not in str(error.value)
