"""The checks Mixer.forward makes of its arguments before any work, once for every mixer.

They read shapes and dtypes only (never values), so they cost no device synchronisation, and
each failure is a one-line ValueError naming the argument, not the torch error of some
projection deep inside the mixer.
"""

from __future__ import annotations

from typing import Any

import torch

from .states import tensors_in


def check_x(op: str, x: Any, d_model: int) -> None:
    """x must be a floating-point (batch, length, d_model) tensor."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{op}: x must be a tensor (batch, length, d_model = {d_model}), got {type(x).__name__}")
    if x.dim() != 3 or x.shape[-1] != d_model:
        raise ValueError(f"{op}: x must be (batch, length, d_model = {d_model}), got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise ValueError(f"{op}: x must be floating point (embeddings, not token ids), got "
                         f"{str(x.dtype).removeprefix('torch.')}")


def check_state_streams(op: str, state: Any, streams: int, source: str) -> None:
    """Every tensor of a state is batch-first: it must hold `streams` sequences, as many as the
    call's input has (`source` says where that count comes from: "x has 2 rows")."""
    if state is None:
        return
    for tensor in tensors_in(state):
        if tensor.dim() == 0 or tensor.shape[0] != streams:
            held = "no sequence dimension" if tensor.dim() == 0 else f"{tensor.shape[0]} sequences"
            raise ValueError(f"{op}: state is of {held} but {source}; pass the state the previous call returned "
                             f"for these sequences, or init_state({streams})")
