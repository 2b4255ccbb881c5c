"""`LayerzooForVLLM`: the model vLLM builds for a layerzoo Hugging Face folder (config.json's
architecture `LayerzooForCausalLM`, registered by the `layerzoo_vllm` plugin).

It holds the folder's CausalLM itself, as `model` (so the folder's weights load by their own
names), and runs its blocks on vLLM's packed steps: each block's norms and FFN as layerzoo has
them, its mixer through vLLM's paged attention (attention, swa) or vLLM's state cache (every
recurrent mixer, one adapter over the mixer contract).
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn
from vllm.config import VllmConfig
from vllm.utils.torch_utils import set_default_torch_dtype
from vllm.v1.kv_cache_interface import MambaSpec

from ...assemblies.causal_lm import CausalLM
from ...mixers.attention import CausalAttention
from ..config import LayerzooConfig
from .attention import PagedAttention
from .errors import ServingError
from .recurrent import StateCachedMixer, state_layout


TIED = {"model.embedding.weight", "model.head.weight"}


class LayerzooForVLLM(nn.Module):
    """vLLM's model interface over a layerzoo CausalLM: forward(input_ids (T,), positions (T,))
    -> final-normed hidden states (T, d_model) of the T tokens of this step; compute_logits
    (N, d_model) -> (N, vocab_size); load_weights from the folder's (name, tensor) pairs.

    Args:
        vllm_config: vLLM's config; its model_config.hf_config is the folder's LayerzooConfig.
        prefix: the model's name prefix in vLLM ("" at the top).

    Raises:
        ServingError: prefix caching is on for a model with layers other than full attention, or vLLM's
            attention cannot take an attention layer's head size.
    """

    # vLLM's flags, read from the class: layers on its state cache (a model whose layer_types are
    # all full attention is a plain decoder to vLLM all the same)
    is_hybrid = True
    has_inner_state = True

    def __init__(self, *, vllm_config: VllmConfig, prefix: str = ""):
        super().__init__()
        config: LayerzooConfig = vllm_config.model_config.hf_config
        self.model = CausalLM(config.model_config())
        self.served = nn.ModuleList(self.served_mixer(index, block.mixer, vllm_config, prefix)
                                    for index, block in enumerate(self.model.blocks))
        # vLLM runs a model with any layer but full attention as a hybrid, whose prefix caching
        # ("align" state mode) would give wrong tokens for recurrent layers and fails without them
        if vllm_config.cache_config.enable_prefix_caching and vllm_config.model_config.is_hybrid:
            raise ServingError("vLLM's prefix caching does not work for layerzoo's recurrent and sliding-window layers: "
                               "pass enable_prefix_caching=False (vllm serve --no-enable-prefix-caching)")

    @staticmethod
    def served_mixer(index: int, mixer: nn.Module, vllm_config: VllmConfig, prefix: str) -> nn.Module:
        """Layer `index`'s mixer on vLLM's paged attention or its state cache."""
        name = f"{prefix}.model.blocks.{index}.mixer" if prefix else f"model.blocks.{index}.mixer"
        if isinstance(mixer, CausalAttention):
            return PagedAttention(mixer, vllm_config.cache_config, name)
        return StateCachedMixer(mixer, name)

    def embed_input_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embedding(input_ids)

    def forward(self, input_ids: torch.Tensor | None, positions: torch.Tensor, intermediate_tensors=None,
                inputs_embeds: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
        x = (self.embed_input_ids(input_ids) if inputs_embeds is None else inputs_embeds)[None]
        for block, served in zip(self.model.blocks, self.served):
            x = block.finish(x, served(block.mixer_norm(x), positions))
        return self.model.final_norm(x)[0]

    def compute_logits(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.model.logits(hidden_states)

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> set[str]:
        """Copy each (name, tensor) of the folder into the parameter of that name; returns the names loaded."""
        parameters = dict(self.named_parameters(remove_duplicate=False))  # a tied head under both its names
        loaded = set()
        for name, tensor in weights:
            if name not in parameters:
                raise ServingError(f"the folder's weight {name} is not one of the model's: is it a layerzoo folder "
                                   f"of this config?")
            with torch.no_grad():
                parameters[name].copy_(tensor)
            loaded.add(name)
        if self.model.config.tie_embeddings and loaded & TIED:  # one tensor: the folder holds it under one name
            loaded |= TIED
        return loaded

    @classmethod
    def get_mamba_specs_from_config(cls, vllm_config: VllmConfig) -> list[MambaSpec]:
        """The state of each recurrent layer (vLLM pads every layer's page to the largest); one
        empty one for a model of attention layers alone, whose pages vLLM then leaves as they are."""
        layouts = state_layouts(vllm_config) or [((), ())]
        return [MambaSpec(shapes=shapes, dtypes=dtypes, block_size=-1) for shapes, dtypes in layouts]

    @classmethod
    def get_mamba_state_shape_from_config(cls, vllm_config: VllmConfig) -> tuple[tuple[int, ...], ...]:
        return largest_layout(vllm_config)[0]

    @classmethod
    def get_mamba_state_dtype_from_config(cls, vllm_config: VllmConfig) -> tuple[torch.dtype, ...]:
        return largest_layout(vllm_config)[1]

    @classmethod
    def get_mamba_state_copy_func(cls) -> tuple:
        return ()  # prefix caching, which copies states between blocks, is refused


def state_layouts(vllm_config: VllmConfig) -> list[tuple[tuple, tuple]]:
    """(shapes, dtypes) of each recurrent layer's state, from the model built on the meta device
    in vLLM's dtype, as the worker builds it."""
    config: LayerzooConfig = vllm_config.model_config.hf_config
    with set_default_torch_dtype(vllm_config.model_config.dtype), torch.device("meta"):
        model = CausalLM(config.model_config())
    return [state_layout(block.mixer.init_state(1))[1:] for block in model.blocks
            if not isinstance(block.mixer, CausalAttention)]


def largest_layout(vllm_config: VllmConfig) -> tuple[tuple, tuple]:
    """The (shapes, dtypes) of the recurrent layer whose state takes the most bytes; ((), ()) for none."""
    layouts = state_layouts(vllm_config) or [((), ())]
    return max(layouts, key=lambda layout: MambaSpec(shapes=layout[0], dtypes=layout[1], block_size=-1).page_size_bytes)
