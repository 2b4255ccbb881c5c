"""The exchange of mixers whose memory S (B, H, R, P) continues linearly: after a piece, S_end =
M S_start + S_ext, M (B, H, R, R) the piece's transition (flash-linear-attention's method for
Gated DeltaNet and KDA; Mamba-2's M is its decay times I). Their short convolutions' caches are
halos of their inputs.

Each rank: (1) all-gathers its convolution halos and builds its first sequence's caches; (2) runs
its piece from those caches and S = 0, and from S = the columns of I in the same batch, giving S_ext
and M; (3) all-gathers them and merges S_start = M_{r-1}(... (M_{j+1} S_ext,j) ...) + S_ext,r-1
over the ranks since its sequence began; (4) reruns its piece from S_start. Every rank works at
once; the cost is about three runs of the piece, and ceil(R / P) more rows in the second.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ....mixers.gated_deltanet import DeltaRuleLayer
from ....mixers.mamba2 import Mamba2
from ....mixers.states import concat_streams, select_streams
from .collectives import all_gather
from .exchanges import register_exchange
from .halo import before_piece, last_tokens, left_filled
from .pieces import Pieces


@dataclass(frozen=True)
class LinearMemory:
    """Where a family keeps what the exchange needs.

    Attributes:
        memory: the state's field holding S (B, H, R, P).
        conv_inputs: (mixer, x) -> {the state's convolution-cache field: the inputs it caches,
            (B, T, channels)}; the fields a mixer built without convolutions holds None are left out.
    """

    memory: str
    conv_inputs: Callable


def _delta_rule_inputs(mixer: DeltaRuleLayer, x: torch.Tensor) -> dict[str, torch.Tensor]:
    convs = {"q_conv": (mixer.q_conv1d, mixer.q_proj), "k_conv": (mixer.k_conv1d, mixer.k_proj),
             "v_conv": (mixer.v_conv1d, mixer.v_proj)}
    return {field: projection(x) for field, (conv, projection) in convs.items() if conv is not None}


def _mamba2_inputs(mixer: Mamba2, x: torch.Tensor) -> dict[str, torch.Tensor]:
    _, xbc, _ = mixer.in_proj(x).split([mixer.d_inner, mixer.conv_dim, mixer.n_heads], dim=-1)
    return {"conv": xbc}


FAMILIES = {DeltaRuleLayer: LinearMemory("recurrent", _delta_rule_inputs), Mamba2: LinearMemory("ssm", _mamba2_inputs)}


def _family(mixer) -> LinearMemory:
    return next(family for cls, family in FAMILIES.items() if isinstance(mixer, cls))


def _first_caches(mixer, family: LinearMemory, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    """(link, {field: this rank's first sequence's convolution cache (B, conv_size - 1, channels)})."""
    inputs = family.conv_inputs(mixer, x)
    template = mixer.init_state(1)
    keeps = {field: getattr(template, field).shape[1] for field in inputs}
    link, gathered = all_gather(pieces.group, link, *(last_tokens(inputs[f], pieces, keeps[f]) for f in inputs))
    return link, {field: left_filled(before_piece(halos, pieces, keeps[field], keeps[field]), keeps[field])
                  for field, halos in zip(inputs, gathered)}


def _with_first(mixer, first, streams: int):
    """The state of a packed row of `streams` sequences: `first` for the first, empty for the
    others; of rows (streams 1), `first`."""
    return first if streams == 1 else concat_streams([first, mixer.init_state(streams - 1)])


def _ext_and_transition(mixer, forward, family: LinearMemory, x, caches, pieces: Pieces, streams: int):
    """(S_ext, M) of the sequence this rank hands on: (handed rows, H, R, P), (handed rows, H, R, R);
    M is zero where that sequence begins in this piece (nothing before it reaches past)."""
    memory = getattr(mixer.init_state(1), family.memory)
    dtype = torch.promote_types(memory.dtype, x.dtype)
    _, heads, width, columns = memory.shape
    if streams > 1:  # packed sequences, the last beginning here: its state from empty is all there is
        _, state = forward(x, None, True, cu_seqlens=pieces.local_cu_seqlens(x.device))
        ext = getattr(select_streams(state, streams - 1, streams), family.memory)
        return ext.to(dtype), ext.new_zeros(1, heads, width, width, dtype=dtype)
    batch, runs = x.shape[0], math.ceil(width / columns)
    # run 0 from S = 0; run i from the columns i*P .. i*P + P - 1 of I (M S_i = those columns of M)
    basis = torch.eye(width, runs * columns, dtype=dtype, device=x.device).reshape(width, runs, columns)
    memories = torch.cat([torch.zeros(1, width, columns, dtype=dtype, device=x.device), basis.permute(1, 0, 2)])
    start = mixer.init_state(batch * (1 + runs))
    start = dataclasses.replace(start, **{field: cache.repeat(1 + runs, 1, 1) for field, cache in caches.items()},
                                **{family.memory: memories.repeat_interleave(batch, 0)[:, None].expand(-1, heads, -1, -1)})
    _, state = forward(x.repeat(1 + runs, 1, 1), start, True)
    final = getattr(state, family.memory).to(dtype).unflatten(0, (1 + runs, batch))
    ext = final[0]
    transition = (final[1:] - ext).permute(1, 2, 3, 0, 4).flatten(3)[..., :width]
    return ext, transition


@register_exchange(DeltaRuleLayer, Mamba2)
def merge_linear_states(mixer, forward, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    family, rank = _family(mixer), pieces.group.rank
    cu_seqlens = pieces.local_cu_seqlens(x.device)
    streams = 1 if cu_seqlens is None else len(cu_seqlens) - 1
    link, caches = _first_caches(mixer, family, x, pieces, link)
    ext, transition = _ext_and_transition(mixer, forward, family, x, caches, pieces, streams)
    link, (exts, transitions) = all_gather(pieces.group, link, ext, transition)
    if not pieces.continues(rank):
        y, state = forward(x, None, True, cu_seqlens=cu_seqlens)
        return y, state, link
    begun = max(source for source in range(rank) if pieces.start(source) <= pieces.sequence_start(pieces.start(rank)))
    memory = exts[begun]
    for source in range(begun + 1, rank):
        memory = transitions[source] @ memory + exts[source]
    first = dataclasses.replace(mixer.init_state(memory.shape[0]), **caches, **{family.memory: memory})
    y, state = forward(x, _with_first(mixer, first, streams), True, cu_seqlens=cu_seqlens)
    return y, state, link
