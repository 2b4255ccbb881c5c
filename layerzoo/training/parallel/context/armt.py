"""ARMT under context parallelism: each rank holds whole segments (Pieces.split with segment_size),
so attention inside a segment needs nothing from another rank; only the associative memory (one
(A, z) per memory layer) crosses a cut, passed rank to rank (states.pass_along): rank r runs its
segments from the memory rank r - 1 ended with. Exact, and sequential over the ranks. Under FSDP2
the ARMT is one unit (fsdp.fsdp_units), so its weights are gathered once, before the ranks take
turns, and its gradients reduce-scattered once, after them.
"""

from __future__ import annotations

import torch
from torch import nn

from ....assemblies.armt.model import ARMT, ARMTState, ARMTStreams
from .collectives import first_link
from .errors import ContextError
from .pieces import Pieces
from .states import pass_along


def armt_of(model: nn.Module) -> ARMT | None:
    """The ARMT `model` is (or wraps, as DDP does), or None."""
    return next((module for module in model.modules() if isinstance(module, ARMT)), None)


def check_trainable(truncate_segments: int | None) -> None:
    """Raise ContextError where an ARMT cannot run context-parallel: ARMT's `truncate_segments`
    counts the segments of a whole call, which no rank's piece holds."""
    if truncate_segments is not None:
        raise ContextError(f"ARMT's truncate_segments ({truncate_segments}) counts a whole call's segments, which "
                           "no rank holds under context parallelism; set it to null")


def check_aligned(armt: ARMT, pieces: Pieces) -> None:
    """Raise ContextError unless `armt` can run on `pieces`: trainable here (check_trainable) and
    every piece starting on a segment edge of the sequence it continues."""
    check_trainable(armt.truncate_segments)
    size = armt.segment_size
    for rank in range(1, pieces.group.size):
        start = pieces.start(rank)
        if (start - pieces.sequence_start(start)) % size:
            raise ContextError(f"ARMT's pieces must hold whole segments: rank {rank}'s starts at token {start}, inside a "
                               f"segment of {size} tokens; split them with Pieces.split(..., segment_size={size})")


def every_weight(armt: ARMT) -> torch.Tensor:
    """A zero hanging from every trainable weight of `armt`: added to a piece's logits, it gives
    each weight a gradient on every rank (zeros where the piece leaves it unused, as the first
    piece leaves the memory's read), so FSDP2 reduce-scatters the same tensors on every rank. A
    weight no rank uses (every packed sequence one segment long) gets zeros, not None."""
    return sum(weight.reshape(-1)[:1].sum() for weight in armt.parameters() if weight.requires_grad) * 0.0


def armt_piece_forward(armt: ARMT, forward, pieces: Pieces, sharded: bool, input_ids: torch.Tensor, state=None,
                       return_state: bool = False, labels=None, attention_mask=None, cu_seqlens=None):
    """ARMT.forward on this rank's piece (B, T_piece), its segments run from the memory the
    previous rank handed on: that rank's slice of the logits, and with return_state its state.
    sharded: the model is sharded with FSDP2 (every weight then gets a gradient: every_weight)."""
    if state is not None or labels is not None or attention_mask is not None:
        raise ContextError("ARMT under context parallelism takes neither a state, labels nor an attention_mask: "
                           "score the piece's logits, and pack sequences with cu_seqlens")
    streams = None if cu_seqlens is None else len(cu_seqlens) - 1

    def run(carried):
        start = None
        if carried is not None and pieces.continues(pieces.group.rank):
            start = ARMTState(carried, None, 0)  # the piece starts a segment: no cache, only the memory
            start = start if streams is None else ARMTStreams([start] + [None] * (streams - 1))
        y, new_state = forward(input_ids, start, True, cu_seqlens=cu_seqlens)
        last = new_state if streams is None else new_state.rows[-1]
        return (y, new_state), last.memory

    (y, new_state), link = pass_along(pieces.group, first_link(input_ids, armt), run)
    y = y + link  # zero: it ties every broadcast into the graph (collectives.py)
    if sharded:
        y = y + every_weight(armt)
    return (y, new_state) if return_state else y
