"""Token embeddings, optionally scaled (Gemma multiplies them by sqrt(d_model))."""

from __future__ import annotations

import torch
from torch import nn


class Embedding(nn.Embedding):
    """input_ids (...) long -> weight[input_ids] (..., dim), times `scale` when it is set.

    The factor is rounded to fp32 and then to the weights' dtype before the product, as
    transformers' Gemma does (in bf16 sqrt(2304) = 48.0 exactly, sqrt(640) = 25.25 not 25.298).
    """

    def __init__(self, num_embeddings: int, dim: int, scale: float | None = None):
        super().__init__(num_embeddings, dim)
        self.scale = scale

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = super().forward(input_ids)
        if self.scale is None:
            return x
        return x * torch.tensor(self.scale, dtype=torch.float32).to(x.dtype)  # a 0-dim CPU tensor: any device's x
