"""What a backend is not written for, run around it: packed sequences (cu_seqlens) through backends
that do not take them, or not empty ones; calls without tokens (B = 0 or T = 0), which run no
backend and give zeros and the carried state."""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from .dtypes import compute_dtype


def per_sequence(run: Callable[[list[torch.Tensor], list[torch.Tensor] | None], tuple[torch.Tensor, Sequence[torch.Tensor]]],
                 inputs: Sequence[tuple[torch.Tensor, Sequence[int]]], state: Sequence[torch.Tensor] | None = None,
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A backend without packed sequences, run once per sequence on views of the packed tensors.

    inputs: (tensor (1, T, ...), its offsets) pairs (attention's queries and keys have their own);
    state: tensors of N rows, or None. run(the sequence's slices (1, l, ...), its state rows
    (1, ...) or None) -> (out (1, l, ...), final state tensors (1, ...)); it must take l = 0.
    Returns the outputs concatenated along time and the final states along rows (N, ...).
    """
    # split, not a slice per sequence: a slice's backward writes a zero tensor as large as the
    # whole input, N of them in all; split's backward is one concatenation.
    pieces = [t.split([end - start for start, end in zip(bounds, bounds[1:])], dim=1) for t, bounds in inputs]
    rows = [None] * len(pieces[0]) if state is None else list(zip(*(t.split(1) for t in state)))
    outputs, states = [], []
    for sequence, sequence_rows in zip(zip(*pieces), rows):
        out, final = run(list(sequence), None if sequence_rows is None else list(sequence_rows))
        outputs.append(out)
        states.append(final)
    return torch.cat(outputs, dim=1), [torch.cat(parts) for parts in zip(*states)]


def without_empty_sequences(run: Callable[[list[int], torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                            bounds: list[int], state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A library kernel that takes packed sequences but is not written for empty ones, run on the
    others: an empty sequence's state passes through.

    run(offsets without repeats, the state rows of the non-empty sequences) -> (out, their final
    state rows); state: (N, ...), the initial state (zeros for the empty one) in the dtype of the
    final state. Returns out and the final state (N, ...).
    """
    kept = [index for index, (start, end) in enumerate(zip(bounds, bounds[1:])) if end > start]
    if len(kept) == len(bounds) - 1:
        return run(bounds, state)
    rows = torch.tensor(kept, device=state.device)
    out, final = run(sorted(set(bounds)), state.index_select(0, rows))
    return out, state.index_copy(0, rows, final)


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
