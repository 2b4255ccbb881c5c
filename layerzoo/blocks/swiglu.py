"""The gated feed-forward network: SwiGLU, or GeGLU with another activation."""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from .projections import Linear

# The gate's activation: SwiGLU's silu (Llama, Qwen), GeGLU's tanh-approximated gelu (Gemma's
# gelu_pytorch_tanh).
ACTIVATIONS = {"silu": F.silu, "gelu_tanh": functools.partial(F.gelu, approximate="tanh")}


def ffn_hidden_size(d_model: int, mult: float = 8 / 3, multiple_of: int = 64) -> int:
    """Hidden width round_up(mult * d_model, multiple_of), the xLSTM-7B / Llama rule."""
    return multiple_of * -(-int(mult * d_model) // multiple_of)


class SwiGLU(nn.Module):
    """x: (..., d_model) -> down(act(gate(x)) * up(x)): (..., d_model); act a key of ACTIVATIONS."""

    def __init__(self, d_model: int, hidden: int, activation: str = "silu"):
        super().__init__()
        self.activation = ACTIVATIONS[activation]
        self.gate_up = Linear(d_model, 2 * hidden, bias=False)  # one matmul for both halves
        self.down = Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(self.activation(gate) * up)
