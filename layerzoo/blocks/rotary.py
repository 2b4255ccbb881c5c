"""Rotary position embedding (RoPE) at absolute positions, so streamed pieces line up."""

from __future__ import annotations

import torch
from torch import nn

from ..kernels.common.dtypes import compute_dtype, upcast
from .meta import reset_unless_meta


class Rotary(nn.Module):
    """Rotates pairs (x[..., i], x[..., i + D/2]) of each head by position * theta^(-2i/D).

    Frequencies are recomputed on the fly (cheap next to attention) rather than cached, so the
    module holds no length-dependent buffer and works at any position.
    """

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"RoPE needs an even head_dim, got {head_dim}")
        self.head_dim, self.theta = head_dim, theta
        self.register_buffer("inv_freq", torch.empty(head_dim // 2), persistent=False)
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """inv_freq (D/2,) fp32 = theta^(-2i/D), computed in fp64. A buffer outside the state dict,
        so a model built on the meta device gets it from here, not from a checkpoint."""
        exponents = torch.arange(0, self.head_dim, 2, dtype=torch.float64, device=self.inv_freq.device)
        with torch.no_grad():
            self.inv_freq.copy_(self.theta ** (-exponents / self.head_dim))

    def forward(self, x: torch.Tensor, positions: torch.Tensor | int = 0) -> torch.Tensor:
        """x: (B, T, H, D) -> rotated x, same shape and dtype. positions: the tokens' absolute
        positions, (B, T) or (T,) integers, or an int offset for positions offset..offset+T-1."""
        return self.rotate_all((x,), positions)[0]

    def rotate_all(self, xs: tuple[torch.Tensor, ...], positions: torch.Tensor | int = 0) -> tuple[torch.Tensor, ...]:
        """Each x (B, T, H_i, D) of xs rotated at the same positions (queries and keys: the angles
        computed once)."""
        x = xs[0]
        if isinstance(positions, int):
            positions = torch.arange(positions, positions + x.shape[1], device=x.device)
        angles = positions.to(x.device, compute_dtype(x.dtype))[..., None] * self.inv_freq.to(x.device)  # ([B,] T, D/2)
        if angles.dim() == 2:
            angles = angles[None]
        cos = angles.cos()[:, :, None, :]
        sin = angles.sin()[:, :, None, :]
        return tuple(rotated(x, cos, sin) for x in xs)


def rotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, D) with its pairs turned by the angles whose cos and sin are (B or 1, T, 1, D/2)."""
    x1, x2 = upcast(x).chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1).to(x.dtype)
