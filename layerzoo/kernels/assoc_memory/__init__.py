"""ARMT's associative memory as two pure ops: read (every token) and update (a write's increments).

Layout follows flash-linear-attention: projections (B, T, H, d). The state is `Memory(matrix,
normalizer)` = (A, z), fp32. Writing tokens is `memory.plus(associative_update(k, v, beta, memory))`;
updates computed against the same memory add up, which is how a segment is written in pieces.
"""

from __future__ import annotations

import torch

from ...errors import unknown_name_message
from .feature_map import NU, dpfp, features
from .memory import Memory, empty_memory
from .reference import associative_read_reference, associative_update_reference
from .vectorized import associative_read_vectorized, associative_update_vectorized

__all__ = [
    "EPS", "Memory", "associative_read", "associative_read_reference", "associative_update",
    "associative_update_reference", "dpfp", "empty_memory", "features",
]

EPS = 1e-5  # the ARMT code's denominator guard
READ_BACKENDS = {"reference": associative_read_reference, "vectorized": associative_read_vectorized}
UPDATE_BACKENDS = {"reference": associative_update_reference, "vectorized": associative_update_vectorized}


def associative_read(q: torch.Tensor, memory: Memory, *, normalize: bool = True, eps: float = EPS,
                     backend: str = "auto") -> torch.Tensor:
    """Read every token from the memory: (phi(q) . A) / (phi(q) . z + eps).

    q: (B, T, H, d) query projections (before the feature map); memory: matrix (B, H, 2*NU*d, Dv),
    normalizer (B, H, 2*NU*d). Returns (B, T, H, Dv) in q's dtype; differentiable in q and memory.
    An all-zero memory reads as exactly 0 (callers may skip the read while the memory is empty).
    """
    if memory is None:
        raise ValueError("associative_read: memory is None; an empty memory reads as 0, so skip the read")
    _check("associative_read", q, memory)
    return READ_BACKENDS[_backend(backend)](q, memory, normalize, eps)


def associative_update(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, memory: Memory | None = None, *,
                       normalize: bool = True, eps: float = EPS, backend: str = "auto") -> Memory:
    """The increments (dA, dz) that writing M tokens adds to `memory` (None or zeros: empty).

    k: (B, M, H, d) key projections; v: (B, M, H, Dv) values; beta: (B, M, H) write strengths in
    (0, 1). Each token is corrected by what the memory already returns for its key (v - v_bar),
    and adds to z only the part of its key the memory has not seen (gamma, not differentiated).
    Returns fp32 increments; differentiable in k, v, beta and memory.
    """
    _check("associative_update", k, memory)
    batch, tokens, heads, _ = k.shape
    if tokens == 0:
        raise ValueError("associative_update: nothing to write (k has 0 tokens)")
    if v.dim() != 4 or v.shape[:3] != k.shape[:3]:
        raise ValueError(f"associative_update: v must be (B, M, H, Dv) matching k {tuple(k.shape)}, got {tuple(v.shape)}")
    if memory is not None and v.shape[-1] != memory.matrix.shape[-1]:
        raise ValueError(f"associative_update: v width {v.shape[-1]} != memory value width {memory.matrix.shape[-1]}")
    if beta.shape != k.shape[:3]:
        raise ValueError(f"associative_update: beta must be (B, M, H) = {tuple(k.shape[:3])}, got {tuple(beta.shape)}")
    return UPDATE_BACKENDS[_backend(backend)](k, v, beta, memory, normalize, eps)


def _backend(name: str) -> str:
    if name == "auto":
        return "vectorized"
    if name not in READ_BACKENDS:
        raise ValueError(unknown_name_message("associative memory backend", name, [*READ_BACKENDS, "auto"]))
    return name


def _check(op: str, x: torch.Tensor, memory: Memory | None) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"{op}: projections must be a float (B, T, heads, d) tensor, got {shape}")
    if memory is None:
        return
    batch, _, heads, dim = x.shape
    key_dim = 2 * NU * dim
    if (memory.matrix.dim() != 4 or memory.matrix.shape[:3] != (batch, heads, key_dim)
            or memory.normalizer.shape != (batch, heads, key_dim)):
        raise ValueError(
            f"{op}: memory must be matrix (B, H, 2*{NU}*d, Dv) = ({batch}, {heads}, {key_dim}, Dv) and normalizer "
            f"({batch}, {heads}, {key_dim}), got {tuple(memory.matrix.shape)} and {tuple(memory.normalizer.shape)}")
