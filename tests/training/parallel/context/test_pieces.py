"""Context parallelism in one process: the split of rows and packed sequences into pieces (ARMT's
into whole segments), the causal work each piece holds and where full attention balances it, and
the refusals that need no other process."""

import dataclasses

import pytest
import torch
from hypothesis import given, settings, strategies as st

import layerzoo
from layerzoo.training.parallel.context import ContextError, ContextGroup, Pieces, context_parallel
from layerzoo.training.parallel.context.attention import worth_balancing


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


@settings(max_examples=60, deadline=None)
@given(size=st.integers(1, 5), lengths=st.lists(st.integers(1, 9), min_size=1, max_size=6))
def test_the_pieces_causal_work_adds_up_to_every_sequences(size, lengths):
    """Each token reads the keys of its sequence up to itself: L (L + 1) / 2 pairs a sequence of L,
    however the pieces cut it."""
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    if int(offsets[-1]) < size:
        return
    pieces = Pieces.split(group(0, size), int(offsets[-1]), offsets)
    assert sum(pieces.causal_work(rank) for rank in range(size)) == sum(n * (n + 1) // 2 for n in lengths)


@pytest.mark.parametrize("offsets, balances", [
    (None, True),                           # rows: the last rank reads every key
    ([0, 3, 6, 9, 12, 15, 18, 21, 24], False),  # sequences shorter than a piece: about even already
    ([0, 1, 24], True),                     # a long sequence across the pieces: 1.52x the average
    ([0, 20, 24], False),                   # 5:1, 1.29x: under UNEVEN
])
def test_full_attention_balances_where_contiguous_pieces_leave_the_work_uneven(offsets, balances):
    cu_seqlens = None if offsets is None else torch.tensor(offsets)
    assert worth_balancing(Pieces.split(group(0, 2), 24, cu_seqlens)) is balances
    assert not worth_balancing(Pieces.split(dataclasses.replace(group(0, 2), balance_attention=False), 24, cu_seqlens))
    assert not worth_balancing(Pieces.split(group(0, 1), 24, cu_seqlens))


@settings(max_examples=80, deadline=None)
@given(size=st.integers(1, 4), segment=st.integers(1, 5), lengths=st.lists(st.integers(1, 12), min_size=1, max_size=4),
       packed=st.booleans())
def test_armt_pieces_hold_whole_segments_as_evenly_as_they_allow(size, segment, lengths, packed):
    lengths = lengths if packed else [sum(lengths)]
    offsets = torch.tensor([0, *lengths]).cumsum(0)
    total = int(offsets[-1])
    # each sequence's segments start at its first token and every `segment` tokens after it
    edges = [start for first, stop in zip(offsets.tolist(), offsets.tolist()[1:]) for start in range(first, stop, segment)]
    cu_seqlens = offsets if packed else None
    if len(edges) < size:
        with pytest.raises(ContextError, match="too few") as error:
            Pieces.split(group(0, size), total, cu_seqlens, segment)
        assert "\n" not in str(error.value)
        return
    covered = [Pieces.split(group(rank, size), total, cu_seqlens, segment).mine for rank in range(size)]
    assert [c[0] for c in covered] == [0, *(c[1] for c in covered[:-1])] and covered[-1][1] == total
    assert all(start in edges for start, _ in covered)
    counts = [sum(start <= edge < stop for edge in edges) for start, stop in covered]
    assert min(counts) >= 1 and max(counts) - min(counts) <= 1


@pytest.fixture(scope="module")
def armt():
    torch.manual_seed(0)
    return layerzoo.build(layerzoo.load_spec("armt-tiny"))  # segments of 8 tokens


def refusal(armt, pieces, **call) -> str:
    """The one-line ContextError of running `armt` on `pieces` (before any collective: the group
    here has no processes)."""
    with pytest.raises(ContextError) as error:
        with context_parallel(armt, pieces):
            armt(torch.zeros(1, pieces.mine[1] - pieces.mine[0], dtype=torch.long), **call)
    assert "\n" not in str(error.value)
    return str(error.value)


def test_armt_pieces_that_cut_a_segment_are_refused_in_one_line(armt):
    assert "rank 1's starts at token 14, inside a segment of 8 tokens" in refusal(armt, Pieces.split(group(0, 2), 29))


def test_armt_with_labels_or_a_state_is_refused_in_one_line(armt):
    pieces = Pieces.split(group(0, 2), 32, segment_size=8)
    ids = torch.zeros(1, 16, dtype=torch.long)
    assert "neither a state, labels" in refusal(armt, pieces, labels=ids)
    assert "neither a state, labels" in refusal(armt, pieces, state=armt.init_state(1))


def test_armt_truncating_its_segments_is_refused_in_one_line(armt):
    armt.truncate_segments = 2
    try:
        assert "truncate_segments (2)" in refusal(armt, Pieces.split(group(0, 2), 32, segment_size=8))
    finally:
        armt.truncate_segments = None


@pytest.mark.parametrize("segment_size", [0, 2.5])
def test_a_segment_size_that_is_not_a_positive_integer_is_refused_in_one_line(segment_size):
    with pytest.raises(ContextError, match="segment_size must be a positive integer"):
        Pieces.split(group(0, 2), 16, segment_size=segment_size)
