"""The "chunkwise" backend: associative memory read and write as batched einsums over a call's
tokens and heads at once.

A read is a (T, key_dim) x (key_dim, value_dim) product per head; a write of M tokens is a sum of M
outer products against one memory. Neither carries a state from token to token: a call is one of
ARMT's segments, the chunk this family works in, done in one batched step where the reference
goes one vector at a time.
"""

from __future__ import annotations

import torch

from .feature_map import features
from .memory import Memory


def associative_read_chunkwise(q: torch.Tensor, memory: Memory, normalize: bool = True, eps: float = 1e-5) -> torch.Tensor:
    """q: (B, T, H, d) -> (phi(q) . A) / (phi(q) . z + eps): (B, T, H, value_dim) in q's dtype."""
    phi = features(q, normalize)
    numerator = torch.einsum("bthk,bhkv->bthv", phi, memory.matrix.to(phi.dtype))
    denominator = torch.einsum("bthk,bhk->bth", phi, memory.normalizer.to(phi.dtype)) + eps
    return (numerator / denominator[..., None]).to(q.dtype)


def associative_update_chunkwise(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, memory: Memory | None = None,
                                  normalize: bool = True, eps: float = 1e-5) -> Memory:
    """The increments (dA, dz) of writing k, v, beta (B, M, H, ...) against `memory`; see the reference."""
    phi = features(k, normalize)  # (B, M, H, key_dim)
    value = v.to(phi.dtype)
    if memory is None:
        correction = value
        gamma = torch.ones_like(phi[..., 0])
    else:
        overlap = torch.einsum("bmhk,bhk->bmh", phi, memory.normalizer.to(phi.dtype))
        v_bar = torch.einsum("bmhk,bhkv->bmhv", phi, memory.matrix.to(phi.dtype)) / (overlap + eps)[..., None]
        correction = value - v_bar
        squared_norm = phi.pow(2).sum(-1).clamp_min(torch.finfo(phi.dtype).tiny)
        gamma = (1 - overlap / squared_norm).clamp(0, 1).detach()
    delta_matrix = torch.einsum("bmhk,bmhv->bhkv", phi * beta.to(phi.dtype)[..., None], correction)
    delta_normalizer = torch.einsum("bmhk,bmh->bhk", phi, gamma)
    return Memory(delta_matrix, delta_normalizer)
