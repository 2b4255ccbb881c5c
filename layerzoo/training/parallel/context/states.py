"""The exchange every mixer can use: pass the state rank to rank, in K rounds every rank joins.

Round j: rank j runs its piece from the state round j - 1 handed it and broadcasts the state of
its last sequence. Exact by the mixer contract (any split, the state threaded through, equals one
call), but rank j waits for ranks 0..j-1: the compute is sequential. ARMT's associative memory
uses it, any mixer with no exchange of its own, and a whole ARMT model (armt.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from ....mixers.assoc_memory import AssociativeMemory
from ....mixers.states import concat_streams, select_streams
from .collectives import broadcast_tree
from .exchanges import register_exchange
from .group import ContextGroup
from .pieces import Pieces


def start_state(mixer, carried: Any, rows: int, pieces: Pieces) -> Any:
    """The state this rank's piece starts from: `carried` (the previous rank's last sequence) for
    its first sequence where that continues, empty for the others; None when nothing is carried."""
    if carried is None or not pieces.continues(pieces.group.rank):
        return None
    if not pieces.packed or rows == 1:
        return carried
    return concat_streams([carried, mixer.init_state(rows - 1)])


def pass_along(group: ContextGroup, link: torch.Tensor, run: Callable[[Any], tuple[Any, Any]]) -> tuple[Any, torch.Tensor]:
    """(this rank's result, the link of the last broadcast): in round j rank j calls
    run(what rank j - 1 handed it, None on rank 0) -> (result, what it hands on), then broadcasts
    that to the group; gradients flow back along the same rounds."""
    carried = result = None
    for source in range(group.size - 1):  # the last rank hands nothing on
        handed = None
        if source == group.rank:
            result, handed = run(carried)
        link, carried = broadcast_tree(group, source, link, handed)
    if group.rank == group.size - 1:
        result, _ = run(carried)
    return result, link


@register_exchange(AssociativeMemory)
def pass_states(mixer, forward, x: torch.Tensor, pieces: Pieces, link: torch.Tensor):
    cu_seqlens = pieces.local_cu_seqlens(x.device)
    rows = x.shape[0] if cu_seqlens is None else len(cu_seqlens) - 1

    def run(carried):
        y, state = forward(x, start_state(mixer, carried, rows, pieces), True, cu_seqlens=cu_seqlens)
        return (y, state), (state if cu_seqlens is None else select_streams(state, rows - 1, rows))

    (y, state), link = pass_along(pieces.group, link, run)
    return y, state, link
