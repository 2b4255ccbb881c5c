"""The decoder block as transformers' GradientCheckpointingLayer, so that
`gradient_checkpointing_enable()` checkpoints each block the transformers way (its function, its
`every_n_layers`, only in training)."""

from __future__ import annotations

from transformers.modeling_layers import GradientCheckpointingLayer

from ..blocks.residual import Block


class DecoderBlock(GradientCheckpointingLayer, Block):
    """layerzoo's pre-norm residual Block (same weights and forward: x (B, T, d_model) -> (B, T,
    d_model), with the mixer's state), recomputed in the backward when transformers enables
    gradient checkpointing."""
