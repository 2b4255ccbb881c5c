"""Normalisation layers."""

from __future__ import annotations

import torch
from torch import nn

from ..kernels.common.dtypes import upcast
from .meta import reset_unless_meta


class RMSNorm(nn.Module):
    """Root-mean-square norm over the last dimension, computed in fp32 for stability.

    x: (..., dim) -> (..., dim), same dtype as x. With groups > 1 each of that many equal slices
    of the last dimension is normalised on its own (Mamba-2's grouped norm); the weight is per
    channel either way.
    """

    def __init__(self, dim: int, eps: float = 1e-6, groups: int = 1):
        super().__init__()
        if dim % groups:
            raise ValueError(f"RMSNorm: dim {dim} is not divisible by groups {groups}")
        self.eps = eps
        self.groups = groups
        self.weight = nn.Parameter(torch.empty(dim))
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        nn.init.ones_(self.weight)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x32 = upcast(x) if self.groups == 1 else upcast(x).unflatten(-1, (self.groups, -1))
        normed = x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.eps)
        normed = normed if self.groups == 1 else normed.flatten(-2)
        return (normed * upcast(self.weight)).to(x.dtype)
