"""Any recurrent layerzoo mixer on vLLM's state cache, by the mixer contract alone.

vLLM keeps one slot of state per running request for each such layer (the tensors this layer
declares: those of the mixer's `init_state(1)`, without the batch dim). Each step, from the
attention metadata (`query_start_loc`: where each request's tokens lie in the packed step;
`state_indices_tensor`: its slot), the adapter gathers the requests' states, starts a request
with no token before this step from the empty state, runs the mixer once on all the tokens
with `cu_seqlens` and writes the states it returns back to their slots: chunked prefill and
decoding, many requests at once, with no code of the mixer's own.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from vllm.config import get_current_vllm_config
from vllm.forward_context import get_forward_context
from vllm.model_executor.layers.mamba.abstract import MambaBase
from vllm.v1.attention.backends.registry import MambaAttentionBackendEnum

from ...mixers.base import Mixer
from ...mixers.states import tensors_in, zip_states


class StateCachedMixer(nn.Module, MambaBase):
    """forward(x (1, T, d_model), positions (T,)) -> (1, T, d_model): the mixer on the tokens of
    the requests vLLM scheduled in this step, each continuing its state in vLLM's cache.

    Args:
        mixer: the layerzoo recurrent mixer; its weights are used in place.
        prefix: the layer's unique name in vLLM (one integer in it: the layer index).
    """

    def __init__(self, mixer: Mixer, prefix: str):
        super().__init__()
        self.mixer, self.prefix = mixer, prefix
        self.empty = mixer.init_state(1)
        self.order, self.shapes, self.dtypes = state_layout(self.empty)
        self.kv_cache = tuple(torch.tensor([]) for _ in self.order)
        context = get_current_vllm_config().compilation_config.static_forward_context
        if prefix in context:
            raise ValueError(f"duplicate layer name: {prefix}")
        context[prefix] = self

    @property
    def mamba_type(self) -> MambaAttentionBackendEnum:
        return MambaAttentionBackendEnum.LINEAR  # its metadata: query_start_loc, seq_lens, state slots

    def get_state_shape(self) -> tuple[tuple[int, ...], ...]:
        return self.shapes

    def get_state_dtype(self) -> tuple[torch.dtype, ...]:
        return self.dtypes

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        metadata = get_forward_context().attn_metadata
        metadata = metadata.get(self.prefix) if isinstance(metadata, dict) else None
        if metadata is None:  # vLLM's profiling run: no cache yet, the tokens as one sequence
            return self.mixer(x)
        starts = metadata.query_start_loc
        requests = len(starts) - 1
        slots = metadata.state_indices_tensor[:requests].long()
        fresh = metadata.seq_lens[:requests] == starts.diff()  # no token of theirs before this step
        caches = self.caches()
        gathered = [torch.where(fresh.view(-1, *[1] * (empty.dim() - 1)), empty, cache[slots])
                    for empty, cache in zip(tensors_in(self.empty), caches)]
        tokens = int(starts[-1])
        y, state = self.mixer(x[:, :tokens], with_tensors(self.empty, gathered), return_state=True, cu_seqlens=starts)
        for cache, tensor in zip(caches, tensors_in(state)):
            cache[slots] = tensor.to(cache.dtype)
        return torch.cat((y, x.new_zeros(1, x.shape[1] - tokens, x.shape[2])), dim=1)

    def caches(self) -> list[torch.Tensor]:
        """vLLM's cache tensors (slots, ...) in the order of the state's own tensors."""
        by_tensor = [torch.tensor([])] * len(self.order)
        for cache, index in zip(self.kv_cache, self.order):
            by_tensor[index] = cache
        return by_tensor


def state_layout(empty: Any) -> tuple[list[int], tuple[tuple[int, ...], ...], tuple[torch.dtype, ...]]:
    """How a mixer's state (`init_state(1)`) lies in vLLM's cache: (the order of its tensors there,
    their shapes without the batch dim, their dtypes). vLLM packs a slot's tensors into one byte
    page, each viewed at its offset: widest dtypes first, so that every offset is a multiple of its
    tensor's element size."""
    tensors = tensors_in(empty)
    order = sorted(range(len(tensors)), key=lambda index: -tensors[index].element_size())
    return order, tuple(tuple(tensors[index].shape[1:]) for index in order), tuple(tensors[index].dtype for index in order)


def with_tensors(template: Any, tensors: list[torch.Tensor]) -> Any:
    """A state of template's structure holding `tensors` (in `tensors_in` order) in place of its own."""
    replacements = iter(tensors)
    return zip_states(lambda parts: next(replacements), [template])
