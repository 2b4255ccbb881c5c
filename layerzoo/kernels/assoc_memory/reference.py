"""Associative memory read and write one vector at a time: the slow, obviously-correct truth.

Every loop body is one equation of the ARMT issue, on single vectors, so the vectorised path can
be checked against it. Inputs are not validated here.
"""

from __future__ import annotations

import torch

from ..common.dtypes import compute_dtype
from .feature_map import features
from .memory import Memory


def associative_read_reference(q: torch.Tensor, memory: Memory, normalize: bool = True, eps: float = 1e-5) -> torch.Tensor:
    """q: (B, T, H, d) query projections -> (B, T, H, value_dim) in q's dtype.

    out = (phi(q) . A) / (phi(q) . z + eps), per token and head; one vector at a time (the truth).
    Inputs are not validated here; `associative_read(..., backend="reference")` validates.

    Args:
        q: (B, T, H, d) query projections, any float dtype.
        memory: matrix (B, H, 2*NU*d, value_dim), normalizer (B, H, 2*NU*d).
        normalize: L2-normalise the features phi(q).
        eps: added to the denominator.

    Returns:
        (B, T, H, value_dim) in q's dtype.
    """
    batch, length, heads, _ = q.shape
    dtype = compute_dtype(q.dtype)  # the memory is read in phi's dtype, whatever its own
    matrix, normalizer = (t.to(dtype) for t in memory)
    out = q.new_zeros(batch, length, heads, matrix.shape[-1], dtype=dtype)
    for b in range(batch):
        for t in range(length):
            for h in range(heads):
                phi = features(q[b, t, h], normalize)
                out[b, t, h] = (phi @ matrix[b, h]) / (phi @ normalizer[b, h] + eps)
    return out.to(q.dtype)


def associative_update_reference(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, memory: Memory | None = None,
                                 normalize: bool = True, eps: float = 1e-5) -> Memory:
    """The increments (dA, dz) that writing M tokens adds to `memory` (None: empty).

    Each token i is written against the memory as it was before the write:
    v_bar_i = (phi(k_i) . A) / (phi(k_i) . z + eps), gamma_i = clip(1 - phi(k_i) . z / |phi(k_i)|^2, 0, 1)
    (not differentiated); dA = sum_i beta_i phi(k_i) (x) (v_i - v_bar_i), dz = sum_i gamma_i phi(k_i).
    Inputs are not validated here; `associative_update(..., backend="reference")` validates.

    Args:
        k: (B, M, H, d) key projections, any float dtype.
        v: (B, M, H, value_dim) values.
        beta: (B, M, H) write strengths in (0, 1).
        memory: matrix (B, H, 2*NU*d, value_dim), normalizer (B, H, 2*NU*d); None: empty.
        normalize: L2-normalise the features phi(k).
        eps: added to the denominator of v_bar.

    Returns:
        The increments (dA, dz) as a Memory, fp32 (fp64 for fp64 k).
    """
    batch, tokens, heads, _ = k.shape
    dtype = compute_dtype(k.dtype)
    if memory is not None:  # read in phi's dtype, whatever its own
        memory = Memory(*(t.to(dtype) for t in memory))
    delta_matrix, delta_normalizer = [], []
    for b in range(batch):
        for h in range(heads):
            matrix = 0
            normalizer = 0
            for i in range(tokens):
                phi = features(k[b, i, h], normalize)
                value = v[b, i, h].to(dtype)
                if memory is None:
                    v_bar, gamma = torch.zeros_like(value), 1.0
                else:
                    overlap = phi @ memory.normalizer[b, h]
                    v_bar = (phi @ memory.matrix[b, h]) / (overlap + eps)
                    gamma = (1 - overlap / phi.pow(2).sum().clamp_min(torch.finfo(dtype).tiny)).clamp(0, 1).detach()
                matrix = matrix + beta[b, i, h].to(dtype) * torch.outer(phi, value - v_bar)
                normalizer = normalizer + gamma * phi
            delta_matrix.append(matrix)
            delta_normalizer.append(normalizer)
    key_dim, value_dim = delta_matrix[0].shape
    return Memory(torch.stack(delta_matrix).view(batch, heads, key_dim, value_dim),
                  torch.stack(delta_normalizer).view(batch, heads, key_dim))
