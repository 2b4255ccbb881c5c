"""Pieces that the chunkwise linear recurrences (gated delta rule, SSD, KDA) compute per chunk.

All tensors are chunk-major: (N, B * H, C, ...) for N chunks of C tokens (chunk_layout.py). Each
works under autograd too (SSD's and KDA's chunkwise kernels differentiate through them).
"""

from __future__ import annotations

import torch


def decays(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From log decays g (N, BH, C): exp(gc), exp(gc_last - gc) (N, BH, C) and L (N, BH, C, C).

    gc is the in-chunk cumulative sum of g; L[i, j] = exp(gc_i - gc_j) for j <= i, 0 above the
    diagonal. gc is summed in fp64 so that gc_i - gc_j keeps the digits of a short span even
    after a strongly negative gate made gc large (in fp32 that difference would lose them); the
    spans are rounded to g's dtype before exp. Every factor is <= 1, so nothing overflows.
    """
    cumulative = g.double().cumsum(-1)
    from_start = cumulative.exp().to(g.dtype)
    to_end = (cumulative[..., -1:] - cumulative).exp().to(g.dtype)
    # the upper triangle would be exp of a positive span, which may overflow: it is exp(-inf) = 0
    # instead, whose gradient is 0 too (an inf zeroed after exp would give NaN gradients)
    span = (cumulative[..., :, None] - cumulative[..., None, :]).to(g.dtype)
    inside = span.masked_fill_(above_diagonal(g.shape[-1], g.device), float("-inf")).exp_()
    return from_start, to_end, inside


def above_diagonal(n: int, device: torch.device) -> torch.Tensor:
    """(n, n) bool, True where j > i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu_(1)


def unit_lower_inverse(a: torch.Tensor, block: int = 16) -> torch.Tensor:
    """(I + strict_tril(a))^-1 for a (..., n, n); a's diagonal and upper triangle are not read.

    Halves recursively, [[X, 0], [Y, Z]]^-1 = [[X^-1, 0], [-Z^-1 Y X^-1, Z^-1]], down to blocks
    of `block` solved against the identity: the batched solver is slow per matrix on CPU, and
    this does most of the work in batched matmuls, which are not.
    """
    n = a.shape[-1]
    if n <= block:
        eye = torch.eye(n, dtype=a.dtype, device=a.device).expand_as(a)
        return torch.linalg.solve_triangular(a, eye, upper=False, unitriangular=True)
    half = n // 2
    top = unit_lower_inverse(a[..., :half, :half], block)
    bottom = unit_lower_inverse(a[..., half:, half:], block)
    inverse = a.new_zeros(a.shape)
    inverse[..., :half, :half] = top
    inverse[..., half:, half:] = bottom
    inverse[..., half:, :half] = bottom @ a[..., half:, :half] @ top
    inverse[..., half:, :half].neg_()
    return inverse
