"""Running a model on this rank's piece: every mixer's forward goes through its exchange."""

from __future__ import annotations

import contextlib
import functools
import warnings
from collections.abc import Iterator

import torch
from torch import nn

from ....assemblies.armt.model import ARMT
from ....mixers.base import Mixer
from . import attention, linear, mlstm, states  # noqa: F401  (they register the shipped mixers' exchanges)
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
    its backward that rank's share of every gradient (sum them over the group).

    Args:
        model: any module whose mixers are layerzoo Mixers.
        pieces: the split of this batch's rows over the group (Pieces.split).

    Raises:
        ContextError: the model is an ARMT, whose segments would have to align with the pieces.
    """
    if isinstance(model, ARMT):
        raise ContextError("ARMT does not run context-parallel yet: its memory segments would have to align with "
                           "the pieces; its assoc_memory mixer alone does (states passed rank to rank)")
    mixers = [module for module in model.modules() if isinstance(module, Mixer)]
    for mixer in mixers:
        mixer.forward = functools.partial(_piece_forward, mixer, type(mixer).forward.__get__(mixer), pieces)
    try:
        yield
    finally:
        for mixer in mixers:
            del mixer.forward
