"""`LayerzooCache`: the mixers' streaming states behind transformers' Cache interface.

transformers' own caches hold key/value tensors that attention layers `update`; a layerzoo model
hands each layer's whole state back instead (constant-size for SWA, mLSTM and Gated DeltaNet, a
growing KVCache for full attention), so this cache just holds that list between calls. States
are trees of batch-first tensors (layerzoo.mixers.states), which is all that beam search's
reordering needs. A recurrent state cannot forget its last tokens, so cropping (assisted and
speculative decoding) is refused in one line.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers.cache_utils import Cache

from ..mixers.states import zip_states


class LayerzooCache(Cache):
    """states: one mixer state per layer (what `CausalLM(..., return_state=True)` returns), or
    None before the first call. columns: input columns read so far, padding included (what
    transformers calls the sequence length: the prompt's width plus the tokens generated); each
    row's own position lives in its states.

    Args:
        states: one mixer state per layer, or None (an empty cache).
        columns: input columns read so far.
        n_layers: layers, for an empty cache (with states, their number).
    """

    def __init__(self, states: list[Any] | None = None, columns: int = 0, n_layers: int = 0):
        super().__init__(layers=[])  # transformers' per-layer key/value objects: none here
        self.states = states
        self.columns = columns
        self.n_layers = len(states) if states is not None else n_layers

    def __repr__(self) -> str:
        return f"LayerzooCache(layers={self.n_layers}, columns={self.columns}, filled={self.states is not None})"

    def __len__(self) -> int:
        return self.n_layers

    def advance(self, states: list[Any], columns: int) -> None:
        """Keep the states after a call that read `columns` more input columns.

        Args:
            states: the call's new states, one per layer.
            columns: the input columns the call read.
        """
        self.states, self.columns, self.n_layers = states, self.columns + columns, len(states)

    def get_seq_length(self, layer_idx: int = 0) -> int:
        return self.columns

    def get_max_length(self, layer_idx: int | None = None) -> int:
        return -1  # no maximum: full attention grows, the other mixers hold no length at all

    @property
    def batch_size(self) -> int:
        if self.states is None:
            return -1
        rows: list[int] = []
        zip_states(lambda parts: rows.append(parts[0].shape[0]), [self.states])
        return rows[0]

    @property
    def is_linear(self) -> list[bool]:
        # False: generate then trusts get_seq_length to skip the columns a continued call has read
        return [False] * self.n_layers

    @property
    def is_compileable(self) -> bool:
        return False

    @property
    def is_initialized(self) -> bool:
        return self.states is not None

    @property
    def is_croppable(self) -> bool:
        return False

    def reset(self) -> None:
        self.states, self.columns = None, 0

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Rows `beam_idx` (N,) of every state, in that order: beam search's step.

        Args:
            beam_idx: (N,) int64 rows to keep, in order.
        """
        self.batch_select_indices(beam_idx)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.states is not None:
            self.states = zip_states(lambda parts: parts[0].index_select(0, indices.to(parts[0].device)), [self.states])

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.states is not None:
            self.states = zip_states(lambda parts: parts[0].repeat_interleave(repeats, dim=0), [self.states])

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove:
            raise self.cannot("crop", f"remove its last {abs(tokens_to_remove)} tokens")

    def activate_past_recording(self) -> None:
        raise self.cannot("activate_past_recording", "keep past states to roll back to")

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        raise self.cannot("update", "take key/value tensors from a transformers attention layer")

    @staticmethod
    def cannot(operation: str, what: str) -> ValueError:
        return ValueError(f"LayerzooCache.{operation}: a layerzoo model's cache holds its mixers' states "
                          f"(recurrent memories, sliding windows), which cannot {what}; assisted and speculative "
                          "decoding need that, plain, sampled and beam-search generation do not")

