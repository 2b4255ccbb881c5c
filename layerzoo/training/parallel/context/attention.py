"""Attention's exchange: every rank all-gathers the keys and values (after RoPE) of the sequence
it hands on (the last window - 1 of them for sliding-window attention; a piece shorter than the
window takes keys from several ranks back), then attends over those of the earlier ranks it
continues, as a KV cache, and its own."""

from __future__ import annotations

import torch

from ....blocks.packing import positions_in_sequences
from ....mixers.attention import CausalAttention, KVCache
from .collectives import all_gather
from .exchanges import register_exchange
from .halo import before_piece, last_tokens
from .pieces import Pieces


def _local_keys(mixer: CausalAttention, x: torch.Tensor, pieces: Pieces, keep: int):
    """(k, v) (B, keep, n_kv_heads, head_dim) of this rank's last sequence's last `keep` tokens
    after RoPE at their positions in their sequence, right-aligned, zeros in front."""
    start, stop = pieces.mine
    first = start - pieces.sequence_start(start)
    if pieces.packed:
        offsets = pieces.local_cu_seqlens(x.device)
        first_positions = torch.zeros(len(offsets) - 1, dtype=torch.long, device=x.device)
        first_positions[0] = first
        positions = positions_in_sequences(offsets, first_positions)[None]
    else:
        positions = first + torch.arange(stop - start, device=x.device)
    _, k, v = mixer.project(x, positions)  # the layer's own projection, norms and RoPE
    return last_tokens(k, pieces, keep), last_tokens(v, pieces, keep)


@register_exchange(CausalAttention)
def gather_keys(mixer: CausalAttention, forward, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    rank = pieces.group.rank
    longest = max(pieces.stop(r) - pieces.start(r) for r in range(pieces.group.size))
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
