"""Running a model on this rank's piece: every mixer's forward goes through its exchange; an ARMT's
whole forward passes its memory rank to rank (armt.py)."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule

from ....mixers.base import Mixer
from . import attention, linear, mlstm, states  # noqa: F401  (they register the shipped mixers' exchanges)
from .armt import armt_of, armt_piece_forward, check_aligned
from .collectives import first_link
from .errors import ContextError
from .exchanges import Exchange, declared_exchange
from .pieces import Pieces

_WARNED: set[type] = set()


def exchange_of(mixer: Mixer) -> Exchange:
    """The mixer's declared exchange; else state passing rank to rank, warned once per class."""
    exchange = declared_exchange(mixer)
    if exchange is not None:
        return exchange
    if type(mixer) not in _WARNED:
        _WARNED.add(type(mixer))
        warnings.warn(f"{type(mixer).__name__} declares no context exchange (register_exchange); passing states "
                      "rank to rank: exact, but sequential", stacklevel=3)
    return states.pass_states


def _piece_forward(mixer: Mixer, forward, pieces: Pieces, x: torch.Tensor, state=None, return_state: bool = False, *,
                   cu_seqlens=None, attention_mask=None):
    if state is not None or attention_mask is not None:
        raise ContextError(f"{type(mixer).__name__}: under context parallelism a mixer takes neither a state nor an "
                         "attention_mask (pack the sequences with cu_seqlens)")
    y, new_state, link = exchange_of(mixer)(mixer, forward, x, pieces, first_link(x, mixer))
    y = y + link  # zero: it ties every collective of the layer into the graph (collectives.py)
    return (y, new_state) if return_state else y


@contextlib.contextmanager
def context_parallel(model: nn.Module, pieces: Pieces) -> Iterator[None]:
    """Within it, `model(ids[:, start:stop], cu_seqlens=pieces.local_cu_seqlens())` on each rank
    of the group (`pieces.slice(ids)`) gives that rank's slice of the single-process output, and
    its backward that rank's share of every gradient (sum them over the group). An ARMT (or a
    DDP around one) runs whole segments per rank, passing its memory on (armt.py).

    Args:
        model: any module whose mixers are layerzoo Mixers, or an ARMT.
        pieces: the split of this batch's rows over the group (Pieces.split; for an ARMT, with
            its segment_size).

    Raises:
        ContextError: an ARMT whose pieces do not hold whole segments, or that truncates its segments.
    """
    armt = armt_of(model)
    if armt is not None:
        check_aligned(armt, pieces)
        sharded = any(isinstance(module, FSDPModule) for module in model.modules())
        # nothing inside a segment crosses a cut: the ARMT's own mixers run as they are
        forwards = {armt: functools.partial(armt_piece_forward, armt, type(armt).forward.__get__(armt), pieces,
                                            sharded)}
    else:
        forwards = {mixer: functools.partial(_piece_forward, mixer, type(mixer).forward.__get__(mixer), pieces)
                    for mixer in model.modules() if isinstance(mixer, Mixer)}
    for module, forward in forwards.items():
        module.forward = forward
    try:
        yield
    finally:
        for module in forwards:
            del module.forward
