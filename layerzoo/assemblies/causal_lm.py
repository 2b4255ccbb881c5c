"""The causal language model a ModelConfig describes: embedding -> blocks -> final norm -> head."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..blocks.norms import RMSNorm
from ..blocks.packing import Packing, check_packed
from ..blocks.residual import Block
from ..registry import get_mixer
from ..specs import ModelConfig, Spec
from .generate import generate


class CausalLM(nn.Module):
    """A stack of pre-norm residual blocks, one registered mixer each.

    forward(input_ids (B, T) long) -> logits (B, T, vocab_size), or (logits, state) with
    return_state, where state is a list of per-layer mixer states to pass back in to continue.
    logits_to_keep K > 0: logits (B, K, vocab_size) of the last K positions only (a long prompt's
    next token needs one row of the head's output, not T).
    Sequences of different lengths: `attention_mask` (B, T), 1 at real tokens and 0 at padding
    (left padding to continue prompts), or `cu_seqlens`, the offsets of sequences packed into one
    row (B = 1). Either way the real tokens run packed, nothing crosses from one sequence to
    another, and the state holds one stream per row (per packed sequence).
    Built from a resolved ModelConfig (`layerzoo.load_spec(...).model`); `layerzoo.build` takes
    a spec directly.
    """

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.blocks = nn.ModuleList(
            Block(config.d_model, get_mixer(layer.type).cls(config.d_model, **layer.options), layer.ffn_hidden, config.norm_eps)
            for layer in config.layers
        )
        self.final_norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embedding.weight
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """The model's own init, after its modules' defaults: embedding (and an untied head) N(0, init_std)."""
        nn.init.normal_(self.embedding.weight, std=self.config.init_std)
        if not self.config.tie_embeddings:
            nn.init.normal_(self.head.weight, std=self.config.init_std)

    def repeated_blocks(self) -> list[nn.Module]:
        """The blocks: the units FSDP shards one by one (then the model itself) and training.compile
        compiles one by one."""
        return list(self.blocks)

    def forward(self, input_ids: torch.Tensor, state: list[Any] | None = None, return_state: bool = False, *,
                attention_mask: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                logits_to_keep: int = 0):
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
        return self.forward_embeddings(self.embedding(input_ids), state, return_state,
                                       attention_mask=attention_mask, cu_seqlens=cu_seqlens, logits_to_keep=logits_to_keep)

    def forward_embeddings(self, x: torch.Tensor, state: list[Any] | None = None, return_state: bool = False, *,
                           attention_mask: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                           logits_to_keep: int = 0):
        """forward from token embeddings x (B, T, d_model), e.g. with ARMT's memory tokens appended."""
        if state is not None and len(state) != len(self.blocks):
            raise ValueError(f"state has {len(state)} layers, the model {len(self.blocks)}")
        if attention_mask is not None and cu_seqlens is not None:
            raise ValueError("pass attention_mask or cu_seqlens, not both")
        packing = None if attention_mask is None else Packing.from_mask(attention_mask, x.shape[:2])
        if packing is not None:
            x, cu_seqlens = packing.pack(x), packing.cu_seqlens
        elif cu_seqlens is not None:
            check_packed("CausalLM", cu_seqlens, x)
        new_state = []
        for index, block in enumerate(self.blocks):
            x, layer_state = block(x, None if state is None else state[index], return_state=True, cu_seqlens=cu_seqlens)
            new_state.append(layer_state)
        if logits_to_keep:
            if packing is not None:  # back in rows first, so that only the kept columns reach the head
                x, packing = packing.unpack(x), None
            x = x[:, -logits_to_keep:]
        logits = self.head(self.final_norm(x))
        if self.config.logit_softcap:
            cap = self.config.logit_softcap
            logits = cap * torch.tanh(logits / cap)
        if packing is not None:
            logits = packing.unpack(logits)
        return (logits, new_state) if return_state else logits

    def init_state(self, batch_size: int) -> list[Any]:
        return [block.mixer.init_state(batch_size) for block in self.blocks]

    def state_size(self, seq_len: int) -> int:
        """State elements per sequence after seq_len tokens, over all layers."""
        return sum(block.mixer.state_size(seq_len) for block in self.blocks)

    generate = generate

    def save_spec(self, path: str | Path) -> None:
        """Write the model's spec; `layerzoo.build(path)` rebuilds the same architecture."""
        Spec(model=self.config).save(path)

