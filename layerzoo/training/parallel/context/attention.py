"""Attention's exchange: every rank all-gathers the keys and values (after RoPE) of the sequence
it hands on (the last window - 1 of them for sliding-window attention; a piece shorter than the
window takes keys from several ranks back), then attends over those of the earlier ranks it
continues, as a KV cache, and its own.

Causal full attention gives the last rank the most work (its queries see every key). With the
group's balance_attention, where contiguous pieces leave the work uneven (worth_balancing), rank r
instead attends for the first half of its own queries and the second half of rank K-1-r's, over
every rank's queries, keys and values, which evens the keys read (in rows; in a packed row, as far
as its sequences allow), and the heads' outputs go back to their owners in a second all-gather."""

from __future__ import annotations

import itertools

import torch

from ....blocks.packing import positions_in_sequences, right_aligned
from ....mixers.attention import CausalAttention, KVCache
from .collectives import all_gather
from .exchanges import register_exchange
from .halo import before_piece, last_tokens, right_padded
from .pieces import Pieces


def _positions(pieces: Pieces, device) -> torch.Tensor:
    """The positions of this rank's tokens in their sequences: (T_piece,) in rows, (1, T_piece) packed."""
    start, stop = pieces.mine
    first = start - pieces.sequence_start(start)
    if not pieces.packed:
        return first + torch.arange(stop - start, device=device)
    offsets = pieces.local_cu_seqlens(device)
    first_positions = torch.zeros(len(offsets) - 1, dtype=torch.long, device=device)
    first_positions[0] = first
    return positions_in_sequences(offsets, first_positions)[None]


def _local_keys(mixer: CausalAttention, x: torch.Tensor, pieces: Pieces, keep: int):
    """(k, v) (B, keep, n_kv_heads, head_dim) of this rank's last sequence's last `keep` tokens
    after RoPE at their positions in their sequence, right-aligned, zeros in front."""
    _, k, v = mixer.project(x, _positions(pieces, x.device))  # the layer's own projection, norms and RoPE
    return last_tokens(k, pieces, keep), last_tokens(v, pieces, keep)


# Balancing gathers every rank's queries and outputs besides the keys: worth it only well above
# even (where, docs/parallel.md's context benchmark measures: rows are at (2K - 1) / K).
UNEVEN = 1.4


def worth_balancing(pieces: Pieces) -> bool:
    """Whether full attention balances over these pieces (the group's balance_attention set): more
    than one rank, each holding 2 tokens or more, and the contiguous pieces' causal work uneven
    (packed rows of sequences shorter than a piece are about even already)."""
    group = pieces.group
    if not group.balance_attention or group.size == 1 or min(pieces.lengths) < 2:
        return False
    work = [pieces.causal_work(r) for r in range(group.size)]
    return max(work) > UNEVEN * sum(work) / group.size


@register_exchange(CausalAttention)
def gather_keys(mixer: CausalAttention, forward, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    if mixer.window is None and worth_balancing(pieces):
        return balanced(mixer, x, pieces, link)
    rank = pieces.group.rank
    longest = max(pieces.lengths)
    keep = longest if mixer.window is None else min(longest, mixer.window - 1)
    link, (keys, values) = all_gather(pieces.group, link, *_local_keys(mixer, x, pieces, keep))
    cu_seqlens = pieces.local_cu_seqlens(x.device)
    if not pieces.continues(rank):
        y, state = forward(x, None, True, cu_seqlens=cu_seqlens)
        return y, state, link
    reach = None if mixer.window is None else mixer.window - 1
    k, v = before_piece(keys, pieces, keep, reach), before_piece(values, pieces, keep, reach)
    start = pieces.start(rank)
    rows = x.shape[0] if cu_seqlens is None else len(cu_seqlens) - 1
    position = torch.zeros(rows, dtype=torch.long, device=x.device)
    if cu_seqlens is None:
        position += start - pieces.sequence_start(start)
        cache = KVCache(k, v, None, position)
    else:  # the first sequence continues; the others start here, with no keys
        position[0] = start - pieces.sequence_start(start)
        lengths = torch.zeros(rows, dtype=torch.long, device=x.device)
        lengths[0] = k.shape[1]
        k, v = (torch.cat((t, t.new_zeros(rows - 1, *t.shape[1:]))) for t in (k, v))
        cache = KVCache(k, v, lengths if rows > 1 else None, position)
    y, state = forward(x, cache, True, cu_seqlens=cu_seqlens)
    return y, state, link


def balanced(mixer: CausalAttention, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    """Full attention over rows (each one sequence from position 0) or a packed row, its work even
    over the ranks: rank w attends for rank w's first half of queries and rank K-1-w's second half."""
    group = pieces.group
    size, rank = group.size, group.rank
    lengths = pieces.lengths
    halves = [(pieces.start(r), pieces.start(r) + lengths[r] // 2, pieces.stop(r)) for r in range(size)]
    q, k, v = mixer.project(x, _positions(pieces, x.device))
    link, gathered = all_gather(group, link, *(right_padded(t, max(lengths)) for t in (q, k, v)))
    q, k, v = (torch.cat([every[r][:, :lengths[r]] for r in range(size)], dim=1) for every in gathered)

    def spans(worker: int) -> list[tuple[int, int]]:  # the global query spans a worker attends for
        first, middle, _ = halves[worker]
        _, middle_mirror, last = halves[size - 1 - worker]
        return [(first, middle), (middle_mirror, last)]

    work = torch.cat([_attend_span(mixer, q, k, v, begin, end, pieces) for begin, end in spans(rank)], dim=1)
    width = max(sum(end - begin for begin, end in spans(worker)) for worker in range(size))
    link, (done,) = all_gather(group, link, right_padded(work, width))
    (begin, end), _ = spans(rank)
    mirror = size - 1 - rank
    (first_begin, first_end), (second_begin, second_end) = spans(mirror)
    offset = first_end - first_begin  # where the mirror's work on this rank's second half starts
    mine = torch.cat((done[rank][:, :end - begin], done[mirror][:, offset:offset + second_end - second_begin]), dim=1)
    return mixer.heads_output(x, mine), _cache(k, v, pieces), link


def _attend_span(mixer: CausalAttention, q, k, v, begin: int, end: int, pieces: Pieces) -> torch.Tensor:
    """The heads' outputs (B, end - begin, n_heads, head_dim) of the queries at global [begin, end)
    of the gathered q (B, T, n_heads, head_dim), each over the keys of its sequence up to itself."""
    if not pieces.packed:
        return mixer.attend(q[:, begin:end], k[:, :end], v[:, :end])
    bounds = pieces.boundaries
    parts = [(first, min(last, end)) for first, last in itertools.pairwise(bounds) if first < end and last > begin]
    queries = [stop - max(first, begin) for first, stop in parts]
    keys = [stop - first for first, stop in parts]
    cu_seqlens, cu_seqlens_k = (torch.tensor([0, *itertools.accumulate(n)], device=q.device) for n in (queries, keys))
    k_parts, v_parts = (torch.cat([t[:, first:stop] for first, stop in parts], dim=1) for t in (k, v))
    return mixer.attend(q[:, begin:end], k_parts, v_parts, cu_seqlens, cu_seqlens_k)


def _cache(k: torch.Tensor, v: torch.Tensor, pieces: Pieces) -> KVCache:
    """The KV cache this rank's piece leaves (the one its contiguous forward returns), from the
    gathered k, v (B, T, n_kv_heads, head_dim): each of its sequences' keys from the sequence's start."""
    start, stop = pieces.mine
    if not pieces.packed:
        position = torch.full((k.shape[0],), stop, dtype=torch.long, device=k.device)
        return KVCache(k[:, :stop], v[:, :stop], None, position)
    ends = [start + offset for offset in pieces.local_offsets(pieces.group.rank)]
    streams = [(pieces.sequence_start(first), last) for first, last in itertools.pairwise(ends)]
    seen = torch.tensor([last - first for first, last in streams], device=k.device)
    cached = [torch.cat([t[0, first:last] for first, last in streams]) for t in (k, v)]
    lengths = seen if bool((seen != seen.max()).any()) else None
    return KVCache(*(right_aligned(t, seen, seen) for t in cached), lengths, seen)

