"""The contract every token mixer follows.

- `Cls(d_model, **options)`; `y = mixer(x)` maps (B, T, d_model) -> (B, T, d_model).
- Streaming: `y, state = mixer(x, state=state, return_state=True)`; `state=None` is the empty
  state, the same as `mixer.init_state(batch_size)`. Any split of a sequence into pieces with the
  state threaded through equals one call; decoding is pieces of length 1.
- Variable lengths: `mixer(x, cu_seqlens=offsets)` takes sequences packed into one row (B = 1,
  offsets [0, l1, l1 + l2, ...]); nothing crosses a boundary and the state has one row per
  sequence. `mixer(x, attention_mask=mask)` takes a padded batch (mask (B, T), 1 at real tokens,
  padding anywhere): its real tokens run packed, the padding changes no state and gets zeros out.
- `mixer.state_size(seq_len)`: state elements per sequence after `seq_len` tokens.
- States are small dataclasses of tensors returned to the caller, never module attributes, so a
  mixer is re-entrant: the same module serves many independent streams.
"""

from __future__ import annotations

from typing import Any, Iterable

import torch
from torch import nn

from ..blocks.packing import Packing, check_packed, lengths_of
from ..errors import OptionError, unknown_name_message
from .states import concat_streams, select_streams


class Mixer(nn.Module):
    """Base class of token mixers. Subclasses implement `mix`, `init_state`, `state_size`; the
    base class's `forward` turns a padded batch into packed sequences for them."""

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

    def forward(self, x: torch.Tensor, state: Any = None, return_state: bool = False, *,
                cu_seqlens: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None):
        """x: (B, T, d_model) -> y: (B, T, d_model), or (y, new_state) if return_state.

        cu_seqlens: (N + 1,) offsets of N sequences packed into x (B = 1); state then has N rows.
        attention_mask: (B, T), 1 at real tokens and 0 at padding; y is 0 at the padding.
        """
        packing = None
        if attention_mask is not None:
            if cu_seqlens is not None:
                raise ValueError(f"{type(self).__name__}: pass cu_seqlens or attention_mask, not both")
            packing = Packing.from_mask(attention_mask, x.shape[:2])
            x, cu_seqlens = packing.pack(x), packing.cu_seqlens
        elif cu_seqlens is not None:
            check_packed(type(self).__name__, cu_seqlens, x)
        if cu_seqlens is None or self.packs_sequences:
            y, new_state = self.mix(x, state, cu_seqlens)
        else:
            y, new_state = self.mix_each_sequence(x, state, cu_seqlens)
        if packing is not None:
            y = packing.unpack(y)
        return (y, new_state) if return_state else y

    # Whether `mix` takes cu_seqlens itself; if not, packed sequences run one at a time through it.
    packs_sequences: bool = False

    def mix(self, x: torch.Tensor, state: Any, cu_seqlens: torch.Tensor | None) -> tuple[torch.Tensor, Any]:
        """x: (B, T, d_model), state or None (empty) -> (y (B, T, d_model), new state).

        cu_seqlens is None unless the class sets packs_sequences; then it may be the validated
        offsets of N sequences packed into x (B = 1), and the state has N rows.
        """
        raise NotImplementedError

    def mix_each_sequence(self, x: torch.Tensor, state: Any, cu_seqlens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """N sequences packed into x (1, T, d_model), each through `mix` on its own stream of the
        state: any mixer's variable-length path, one call per sequence."""
        streams = len(cu_seqlens) - 1
        state = self.init_state(streams) if state is None else state
        if streams == 0:
            return x, state
        results = [self.mix(piece, select_streams(state, n, n + 1), None)
                   for n, piece in enumerate(x.split(lengths_of(cu_seqlens).tolist(), dim=1))]
        return torch.cat([y for y, _ in results], dim=1), concat_streams([s for _, s in results])

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
