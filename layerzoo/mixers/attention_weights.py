"""Attention weights on request: inside `recorded_attention()`, every attention layer a forward
runs appends its softmax weights to the list the block gives, in the order the layers run: a
tensor (B, H, Tq, Tk) for rows of equal length over equal histories, else (packed sequences,
a padded batch, a ragged cache) a list of one tensor (H, its queries, its keys) per sequence,
the keys its cached ones then its new ones.

The weights are not part of a mixer's result (the fast kernels never materialise them), so
they are computed again from the layer's queries and keys, by the dense reference, only while a
recording is active. A context variable, not a module attribute: the model stays re-entrant.
Compiled code does not record: torch.compile reads `recording()` once, when it traces.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Callable, Iterator

import torch

from ..kernels.common.backends import constant_when_traced

_RECORDING: ContextVar[list[torch.Tensor | list[torch.Tensor]] | None] = ContextVar("layerzoo_attention_weights", default=None)


@contextlib.contextmanager
def recorded_attention() -> Iterator[list[torch.Tensor | list[torch.Tensor]]]:
    """A list that fills with each attention layer's weights as the forward runs (see above)."""
    weights: list[torch.Tensor] = []
    token = _RECORDING.set(weights)
    try:
        yield weights
    finally:
        _RECORDING.reset(token)


@constant_when_traced
def recording() -> bool:
    """Whether a recording is active."""
    return _RECORDING.get() is not None


def record(weights: Callable[[], torch.Tensor | list[torch.Tensor]]) -> None:
    """Append weights() to the active recording, when there is one."""
    if recording():
        _RECORDING.get().append(weights())
