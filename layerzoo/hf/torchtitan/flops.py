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
Both mixing terms come from the mixers' own `state_size(seq_len)` (keys and values for attention).
"""

from __future__ import annotations

from torch import nn

from ...mixers.attention import CausalAttention


def flops_per_token(model: nn.Module, seq_len: int) -> int:
    """Training FLOPs per token of `model` (a CausalLM, on any device, meta too) at seq_len."""
    weights = sum(p.numel() for p in model.parameters()) - model.embedding.weight.numel()
    return 6 * weights + sum(mixing_flops(block.mixer, seq_len) for block in model.blocks)


def mixing_flops(mixer: nn.Module, seq_len: int) -> int:
    """Training FLOPs per token of one mixer's token mixing (see the module's docstring)."""
    state = mixer.state_size(seq_len)
    if isinstance(mixer, CausalAttention):  # the state is one key and one value per kv head; every query head reads them
        return 3 * 2 * state * mixer.n_heads // mixer.n_kv_heads
    return 3 * 2 * 2 * state
