"""Calls without tokens (B = 0 or T = 0): they run no backend, and give zeros and the carried state."""

from __future__ import annotations

from typing import Sequence

import torch

from .dtypes import compute_dtype


def has_tokens(x: torch.Tensor) -> bool:
    """Whether x (B, T, ...) holds a token. Calls without one (B = 0 or T = 0) run no backend."""
    return x.shape[0] > 0 and x.shape[1] > 0


def empty_output(x: torch.Tensor, width: int) -> torch.Tensor:
    """The output of a call without tokens: zeros (B, T, H, width) in x's dtype, for x (B, T, H, ...)."""
    return x.new_zeros(*x.shape[:3], width)


def carried_state(state: Sequence[torch.Tensor] | None, shapes: Sequence[tuple[int, ...]],
                  x: torch.Tensor) -> list[torch.Tensor]:
    """The final state of a call without tokens: the initial state's tensors in the compute dtype
    of x (an identity for autograd where they already are, so gradients pass through), or zeros
    of `shapes` (the empty state) when there is none."""
    dtype = compute_dtype(x.dtype)
    if state is None:
        return [x.new_zeros(shape, dtype=dtype) for shape in shapes]
    return [t.to(dtype) for t in state]
