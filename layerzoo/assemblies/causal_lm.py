"""The causal language model a ModelConfig describes: embedding -> blocks -> final norm -> head."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from ..blocks.embedding import Embedding
from ..blocks.meta import reset_unless_meta
from ..blocks.norms import RMSNorm
from ..blocks.packing import Packing, check_packed
from ..blocks.projections import projection_init
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

    Args:
        config: the resolved ModelConfig: width, vocabulary, and each layer's mixer and options.
        block: the class of the blocks, Block or a subclass of it (layerzoo.hf's is transformers'
            GradientCheckpointingLayer too).
    """

    # Recompute each block in the backward instead of keeping its activations (transformers'
    # gradient_checkpointing_enable() sets both, the function with its own arguments). A block
    # with a switch of its own (transformers' GradientCheckpointingLayer) decides for itself.
    gradient_checkpointing = False
    _gradient_checkpointing_func = staticmethod(functools.partial(checkpoint, use_reentrant=False))

    def __init__(self, config: ModelConfig, block: type[Block] = Block):
        super().__init__()
        self.config = self._built_from = config
        self.embedding = Embedding(config.vocab_size, config.d_model, config.d_model**0.5 if config.scale_embeddings else None)
        with projection_init(config.projection_init, config.init_std):
            self.blocks = nn.ModuleList(
                block(config.d_model, get_mixer(layer.type).cls(config.d_model, **layer.options), layer.ffn_hidden,
                      config.norm_eps, post_norms=config.post_norms, ffn_activation=config.ffn_activation)
                for layer in config.layers
            )
        self.final_norm = RMSNorm(config.d_model, config.norm_eps)
        self.head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.head.weight = self.embedding.weight
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """The model's own init, after its modules' defaults: embedding (and an untied head) N(0, init_std)."""
        nn.init.normal_(self.embedding.weight, std=self.config.init_std)
        if not self.config.tie_embeddings:
            nn.init.normal_(self.head.weight, std=self.config.init_std)

    def refresh_config(self) -> None:
        """`config` as the mixers run now, after `set_window` changed their options: the config the
        model was built from, each layer's options its mixer's."""
        self.config = self._built_from.with_layer_options([block.mixer.options for block in self.blocks])

    def repeated_blocks(self) -> list[nn.Module]:
        """The blocks: the units FSDP shards one by one (then the model itself) and training.compile
        compiles one by one."""
        return list(self.blocks)

    def forward(self, input_ids: torch.Tensor, state: list[Any] | None = None, return_state: bool = False, *,
                attention_mask: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                logits_to_keep: int = 0, hidden_states: list[torch.Tensor] | None = None):
        """The logits of the next token at each position.

        Args:
            input_ids: (B, T) int64 token ids in [0, vocab_size).
            state: the list of per-layer mixer states a previous call returned, or None to start.
            return_state: also return the state after the last token.
            attention_mask: (B, T) of 1 at real tokens and 0 at padding; logits are 0 at padding.
                Not with cu_seqlens.
            cu_seqlens: (N + 1,) int32 / int64 offsets of N sequences packed into one row (B = 1).
            logits_to_keep: K > 0: the logits of the last K positions only; 0: all.
            hidden_states: a list to append the n_layers + 1 hidden states (B, T, d_model) to
                (see forward_embeddings), or None.

        Returns:
            logits (B, T, vocab_size) (K positions with logits_to_keep) in the model's dtype; with
                return_state, (logits, state), state a list of one mixer state per layer.

        Raises:
            ValueError: input_ids is not (B, T); the state has another number of layers or
                streams; both attention_mask and cu_seqlens, or either malformed.
        """
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, length), got shape {tuple(input_ids.shape)}")
        return self.forward_embeddings(self.embedding(input_ids), state, return_state, attention_mask=attention_mask,
                                       cu_seqlens=cu_seqlens, logits_to_keep=logits_to_keep, hidden_states=hidden_states)

    def forward_embeddings(self, x: torch.Tensor, state: list[Any] | None = None, return_state: bool = False, *,
                           attention_mask: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None,
                           logits_to_keep: int = 0, hidden_states: list[torch.Tensor] | None = None):
        """forward from token embeddings x (B, T, d_model), e.g. with ARMT's memory tokens appended.

        Args:
            x: (B, T, d_model) embeddings in the model's dtype.
            state: per-layer mixer states, or None.
            return_state: also return the state.
            attention_mask: (B, T) of 1 at real tokens and 0 at padding, or None.
            cu_seqlens: offsets of sequences packed into one row (B = 1), or None.
            logits_to_keep: K > 0: the last K positions' logits only.
            hidden_states: a list to append the hidden states to, n_layers + 1 of them
                (B, T, d_model) as transformers counts them: the embeddings, each block's output
                but the last, and the final norm's output; zeros at padding, and every column
                whatever logits_to_keep.

        Returns:
            logits, or (logits, state) with return_state, as forward.

        Raises:
            ValueError: as forward.
        """
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
            if hidden_states is not None:
                x = handed_out(x, packing, hidden_states)
            checkpointed = self.gradient_checkpointing and torch.is_grad_enabled() and not hasattr(block, "gradient_checkpointing")
            run = self._gradient_checkpointing_func if checkpointed else call
            x, layer_state = run(block.__call__, x, None if state is None else state[index], True, cu_seqlens=cu_seqlens)
            new_state.append(layer_state)
        x = self.final_norm(x)  # per token: the same before or after keeping the last columns
        if hidden_states is not None:
            x = handed_out(x, packing, hidden_states)
        if logits_to_keep:
            if packing is not None:  # back in rows first, so that only the kept columns reach the head
                x, packing = packing.unpack(x), None
            x = x[:, -logits_to_keep:]
        logits = self.logits(x)
        if packing is not None:
            logits = packing.unpack(logits)
        return (logits, new_state) if return_state else logits

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        """The head on final-normed hidden states x (..., d_model) -> logits (..., vocab_size),
        soft-capped where the config says."""
        logits = self.head(x)
        if self.config.logit_softcap:
            cap = self.config.logit_softcap
            logits = cap * torch.tanh(logits / cap)
        return logits

    def init_state(self, batch_size: int) -> list[Any]:
        """The empty state for `batch_size` sequences.

        Args:
            batch_size: sequences B.

        Returns:
            One empty mixer state per layer (each mixer's `init_state(batch_size)`).
        """
        return [block.mixer.init_state(batch_size) for block in self.blocks]

    def state_size(self, seq_len: int) -> int:
        """State elements per sequence after seq_len tokens, over all layers.

        Args:
            seq_len: tokens seen.

        Returns:
            The sum of the mixers' `state_size(seq_len)`.
        """
        return sum(block.mixer.state_size(seq_len) for block in self.blocks)

    generate = generate

    def save_spec(self, path: str | Path) -> None:
        """Write the model's spec; `layerzoo.build(path)` rebuilds the same architecture."""
        Spec(model=self.config).save(path)


def call(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """function(*args, **kwargs): a block run without checkpointing."""
    return function(*args, **kwargs)


def handed_out(x: torch.Tensor, packing: Packing | None, hidden_states: list[torch.Tensor]) -> torch.Tensor:
    """x (B, T, d_model), or its real tokens (1, N, d_model) when packing, after appending it in rows
    (B, T, d_model) to hidden_states; packed again from those rows, so that what follows reads the
    tensor handed out (gradients taken at a hidden state reach it)."""
    rows = x if packing is None else packing.unpack(x)
    hidden_states.append(rows)
    return rows if packing is None else packing.pack(rows)
