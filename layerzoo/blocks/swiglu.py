"""SwiGLU feed-forward network."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .projections import Linear


def ffn_hidden_size(d_model: int, mult: float = 8 / 3, multiple_of: int = 64) -> int:
    """Hidden width round_up(mult * d_model, multiple_of), the xLSTM-7B / Llama rule."""
    return multiple_of * -(-int(mult * d_model) // multiple_of)


class SwiGLU(nn.Module):
    """x: (..., d_model) -> down(silu(gate(x)) * up(x)): (..., d_model)."""

    def __init__(self, d_model: int, hidden: int):
        super().__init__()
        self.gate_up = Linear(d_model, 2 * hidden, bias=False)  # one matmul for both halves
        self.down = Linear(hidden, d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = self.gate_up(x).chunk(2, dim=-1)
        return self.down(F.silu(gate) * up)
