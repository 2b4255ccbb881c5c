"""FLOPs per trained token, for torchtitan's MFU.

A product costs 2 FLOPs per weight or state element it reads, and training costs three forwards
(the backward computes two products per forward one). So, per token:
- the weights: 6 * (parameters - the embedding table, a lookup, not a product);
- attention (full or sliding window): the scores and the value sum each read every query head's
  keys or values over the context: 2 * 2 * n_heads * head_dim * context forward, context =
  min(window, seq_len) (torchtitan's convention: the whole context, not its causal half);
- a recurrent mixer (Gated DeltaNet, mLSTM, Mamba-2, KDA, ARMT memory): its state is read for the
  output and written by the update once per token: 2 * 2 * its state elements forward. Chunkwise
  kernels spend more inside a chunk; that is not counted, as the sequential form would not spend it.
The recurrent term takes the mixer's own `state_size(seq_len)` (its matrix memory, and its short
convolutions' few inputs).

A transformers decoder (the base of an ARMT around a Hugging Face checkpoint) counts as full
attention in every layer. An ARMT runs its base on each segment and its memory tokens: a text token carries
(segment + memory tokens) / segment of a token's cost in the base at the context of one segment,
and every memory layer's weights and its (A, z), read at each position.
"""

from __future__ import annotations

from torch import nn

from ...assemblies.armt import ARMT
from ...assemblies.causal_lm import CausalLM
from ...mixers.attention import CausalAttention


def flops_per_token(model: nn.Module, seq_len: int) -> int:
    """Training FLOPs per token of `model` (a CausalLM, an ARMT, or the transformers causal LM an
    ARMT wraps; on any device, meta too) at seq_len."""
    if isinstance(model, ARMT):
        return armt_flops_per_token(model, seq_len)
    if not isinstance(model, CausalLM):  # a transformers decoder: full attention in every layer
        config = model.config
        weights = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return 6 * weights + config.num_hidden_layers * 3 * 2 * 2 * config.num_attention_heads * head_dim * seq_len
    weights = sum(p.numel() for p in model.parameters()) - model.embedding.weight.numel()
    return 6 * weights + sum(mixing_flops(block.mixer, seq_len) for block in model.blocks)


def mixing_flops(mixer: nn.Module, seq_len: int) -> int:
    """Training FLOPs per token of one mixer's token mixing (see the module's docstring)."""
    if isinstance(mixer, CausalAttention):
        context = seq_len if mixer.window is None else min(mixer.window, seq_len)
        return 3 * 2 * 2 * mixer.n_heads * mixer.head_dim * context
    return 3 * 2 * 2 * mixer.state_size(seq_len)


def armt_flops_per_token(armt: ARMT, seq_len: int) -> int:
    """Training FLOPs per text token of an ARMT (see the module's docstring)."""
    segment = min(seq_len, armt.segment_size)
    per_pass = flops_per_token(armt.base, segment + armt.num_mem_tokens)
    for memory in armt.memories.values():
        per_pass += 6 * sum(p.numel() for p in memory.parameters()) + 3 * 2 * 2 * memory.memory_size()
    return per_pass * (segment + armt.num_mem_tokens) // segment
