"""The pre-norm residual block that wraps any mixer (one block contract, the mixer passed in)."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from .norms import RMSNorm
from .swiglu import SwiGLU


class Block(nn.Module):
    """x + mixer(norm(x)), then x + ffn(norm(x)) when the layer has an FFN.

    x: (B, T, d_model) -> (B, T, d_model). The mixer's streaming state and cu_seqlens (packed
    sequences, B = 1) pass straight through; the norms and the FFN act on each token alone.
    post_norms: an RMSNorm also on the mixer's and the FFN's outputs before each residual add,
    x + post_norm(mixer(norm(x))) (Gemma's sandwich norms). ffn_activation: the FFN's gate
    activation (swiglu.ACTIVATIONS: silu, gelu_tanh).
    """

    def __init__(self, d_model: int, mixer: nn.Module, ffn_hidden: int | None, norm_eps: float = 1e-6, *,
                 post_norms: bool = False, ffn_activation: str = "silu"):
        super().__init__()
        self.mixer_norm = RMSNorm(d_model, norm_eps)
        self.mixer = mixer
        self.mixer_post_norm = RMSNorm(d_model, norm_eps) if post_norms else None
        self.ffn_norm = RMSNorm(d_model, norm_eps) if ffn_hidden else None
        self.ffn = SwiGLU(d_model, ffn_hidden, ffn_activation) if ffn_hidden else None
        self.ffn_post_norm = RMSNorm(d_model, norm_eps) if post_norms and ffn_hidden else None

    def forward(self, x: torch.Tensor, state: Any = None, return_state: bool = False,
                cu_seqlens: torch.Tensor | None = None):
        mixed, new_state = self.mixer(self.mixer_norm(x), state=state, return_state=True, cu_seqlens=cu_seqlens)
        x = self.finish(x, mixed)
        return (x, new_state) if return_state else x

    def finish(self, x: torch.Tensor, mixed: torch.Tensor) -> torch.Tensor:
        """The block's output from its input x and the mixer's output on mixer_norm(x), both
        (..., d_model): the residual add, then the FFN's (a server running the mixer its own way
        calls this around it)."""
        x = x + post(self.mixer_post_norm, mixed)
        if self.ffn is not None:
            x = x + post(self.ffn_post_norm, self.ffn(self.ffn_norm(x)))
        return x


def post(norm: RMSNorm | None, y: torch.Tensor) -> torch.Tensor:
    """y through the post-norm, when the block has them."""
    return y if norm is None else norm(y)
