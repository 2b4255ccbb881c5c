"""The causal LMs ARMT wraps, behind one small interface: a layerzoo CausalLM or a transformers model.

ARMT needs four things of a base model: its token embedding, its list of layers (to read and write
memory around them), a forward from embeddings at positions local to the segment with a cache for
the segment's tokens so far, and how many positions it can take.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from torch import nn

from ..causal_lm import CausalLM

# Where transformers keeps the decoder layers of a causal LM, by model family.
HF_LAYER_PATHS = (
    "model.layers",                 # Llama, SmolLM2, Mistral, Qwen, Gemma-3 (text)
    "transformer.h",                # GPT-2
    "gpt_neox.layers",              # GPT-NeoX, Pythia
    "model.language_model.layers",  # Gemma-3 with its vision tower
    "model.decoder.layers",         # OPT
)


class Backbone:
    """A base model as ARMT sees it (not a module: the model itself is registered on the ARMT).

    run(embeds (B, L, d_model), cache, offset, use_cache) -> (logits (B, L, V), cache or None):
    embeds sit at segment positions offset .. offset + L - 1, after the tokens `cache` holds.
    """

    def __init__(self, model: nn.Module, layers: nn.ModuleList, d_model: int, max_positions: int | None):
        self.model = model
        self.layers = layers
        self.d_model = d_model
        self.max_positions = max_positions

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.get_input_embeddings()(input_ids)

    def run(self, embeds: torch.Tensor, cache: Any, offset: int, use_cache: bool) -> tuple[torch.Tensor, Any]:
        raise NotImplementedError


class LayerzooBackbone(Backbone):
    """A layerzoo CausalLM: its cache is the list of mixer states, which also carries the positions."""

    def __init__(self, model: CausalLM):
        super().__init__(model, model.blocks, model.config.d_model, None)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embedding(input_ids)

    def run(self, embeds, cache, offset, use_cache):
        logits, state = self.model.forward_embeddings(embeds, cache, return_state=True)
        return logits, state if use_cache else None


class HFBackbone(Backbone):
    """A transformers causal LM, run on inputs_embeds with explicit position_ids.

    Its cache is a transformers Cache, which the model extends in place.
    """

    def __init__(self, model: nn.Module):
        super().__init__(model, find_decoder_layers(model), model.get_input_embeddings().embedding_dim,
                         getattr(model.config, "max_position_embeddings", None))
        # transformers names the cache argument `cache` or `past_key_values`, by version: take either.
        self.cache_argument = "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"

    def run(self, embeds, cache, offset, use_cache):
        positions = torch.arange(offset, offset + embeds.shape[1], device=embeds.device)[None]
        out = self.model(inputs_embeds=embeds, position_ids=positions, use_cache=use_cache,
                         **{self.cache_argument: cache})
        return out.logits, getattr(out, self.cache_argument) if use_cache else None


def backbone_for(model: nn.Module) -> Backbone:
    if isinstance(model, CausalLM):
        return LayerzooBackbone(model)
    if hasattr(model, "get_input_embeddings") and hasattr(model, "config"):
        return HFBackbone(model)
    raise TypeError(f"ARMT wraps a layerzoo CausalLM or a transformers causal LM, got {type(model).__name__}")


def find_decoder_layers(model: nn.Module) -> nn.ModuleList:
    """The decoder layers of a transformers causal LM, found at the first of HF_LAYER_PATHS it has."""
    for path in HF_LAYER_PATHS:
        found = model
        for name in path.split("."):
            found = getattr(found, name, None)
        if isinstance(found, nn.ModuleList):
            return found
    raise TypeError(f"cannot find the decoder layers of {type(model).__name__} (looked at {', '.join(HF_LAYER_PATHS)})")
