"""The same tensor in other memory layouts, for kernels that must not assume contiguous inputs."""

from __future__ import annotations

import torch


def relayout(t: torch.Tensor, layout: str) -> torch.Tensor:
    """The same values as t (B, T, H[, D]) in another memory layout, as a view."""
    if layout == "token_major":  # contiguous
        return t
    if layout == "channel_major":  # (B, H * D, T) transposed: a convolution's output
        flat = t.flatten(2) if t.dim() == 4 else t
        return flat.transpose(1, 2).contiguous().transpose(1, 2).view(t.shape)
    wider = t.new_zeros(*t.shape[:-1], 2 * t.shape[-1])  # every other element of a larger tensor
    wider[..., ::2] = t
    return wider[..., ::2]


LAYOUTS = ("token_major", "channel_major", "strided")
