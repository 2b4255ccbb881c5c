"""The contract every token mixer follows.

- `Cls(d_model, **options)`; `y = mixer(x)` maps (B, T, d_model) -> (B, T, d_model).
- Streaming: `y, state = mixer(x, state=state, return_state=True)`; `state=None` is the empty
  state, the same as `mixer.init_state(batch_size)`. Any split of a sequence into pieces with the
  state threaded through equals one call; decoding is pieces of length 1.
- `mixer.state_size(seq_len)`: state elements per sequence after `seq_len` tokens.
- States are small dataclasses of tensors returned to the caller, never module attributes, so a
  mixer is re-entrant: the same module serves many independent streams.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from ..errors import OptionError, unknown_name_message


class Mixer(nn.Module):
    """Base class of token mixers. Subclasses implement `forward`, `init_state`, `state_size`."""

    registry_name: str = ""

    def __init__(self, d_model: int):
        super().__init__()
        if not isinstance(d_model, int) or d_model <= 0:
            raise OptionError("d_model", f"d_model must be a positive integer, got {d_model!r}")
        self.d_model = d_model

    @classmethod
    def check_options(cls, d_model: int, **options: Any) -> None:
        """Raise OptionError if these options cannot build a mixer. Cheap: allocates nothing.

        `options` are complete: every keyword of `__init__`, defaults filled in (a constructor
        passes its own arguments; `get_mixer(name).check(d_model, **some)` fills in the rest), so
        an override lists its options without defaults. Types are checked before, from the
        annotations; this checks values and combinations. Specs call it to validate a file without
        building the model, and each constructor calls it once.
        """

    def forward(self, x: torch.Tensor, state: Any = None, return_state: bool = False):
        """x: (B, T, d_model) -> y: (B, T, d_model), or (y, new_state) if return_state."""
        raise NotImplementedError

    def init_state(self, batch_size: int) -> Any:
        """The empty state for `batch_size` sequences, on this module's device."""
        raise NotImplementedError

    def state_size(self, seq_len: int) -> int:
        """Number of state elements per sequence after `seq_len` tokens."""
        raise NotImplementedError


def check_backend(kind: str, backend: str, backends: Iterable[str]) -> None:
    """A mixer's `backend` option: "auto" or the name of one of its kernel's backends."""
    if backend != "auto" and backend not in backends:
        raise OptionError("backend", unknown_name_message(f"{kind} backend", backend, ["auto", *backends]))
