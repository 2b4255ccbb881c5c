"""The associative memory's public ops, their backend choice and their backends by name.

Backends: "reference" (one vector at a time, the truth), "chunkwise" (batched einsums over the
call's segment).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch

from ..common.autocast import outside_autocast
from ..common.backends import choose_backend
from ..common.checks import check_tensors
from ..common.sequences import carried_state, empty_output, has_tokens
from .chunkwise import associative_read_chunkwise, associative_update_chunkwise
from .feature_map import NU
from .memory import Memory
from .reference import associative_read_reference, associative_update_reference

EPS = 1e-5  # the ARMT code's denominator guard


class MemoryBackend(NamedTuple):
    """The two ops of one backend, each taking validated inputs holding at least one token by
    keyword: read(q, memory, normalize, eps) -> out; update(k, v, beta, memory (or None),
    normalize, eps) -> increments."""

    read: Callable[..., torch.Tensor]
    update: Callable[..., Memory]


BACKENDS = {  # autocast off inside: the memory is a sum over every write, kept in fp32 (common/autocast.py)
    name: MemoryBackend(outside_autocast(read), outside_autocast(update)) for name, (read, update) in {
        "reference": (associative_read_reference, associative_update_reference),
        "chunkwise": (associative_read_chunkwise, associative_update_chunkwise),
    }.items()
}
# Old names, refused with the new one as the did-you-mean.
RENAMED = {"vectorized": "chunkwise"}


def associative_read(q: torch.Tensor, memory: Memory, *, normalize: bool = True, eps: float = EPS,
                     backend: str = "auto") -> torch.Tensor:
    """Read every token from the memory: (phi(q) . A) / (phi(q) . z + eps).

    Differentiable in q and memory. Any B, T >= 0. An all-zero memory reads as exactly 0 (callers
    may skip the read while the memory is empty).

    Args:
        q: (B, T, H, d) query projections (before the feature map), any float dtype.
        memory: the Memory to read: matrix (B, H, 2*NU*d, Dv), normalizer (B, H, 2*NU*d).
        normalize: L2-normalise the features phi(q), as ARMT does.
        eps: added to the denominator.
        backend: "auto" ("chunkwise") or a key of BACKENDS ("reference", "chunkwise").

    Returns:
        (B, T, H, Dv) in q's dtype.

    Raises:
        ValueError: memory is None or not a Memory; a tensor of the wrong shape (the memory's key
            width must be 2*NU*d), not floating point or on another device; an unknown backend.
    """
    if memory is None:
        raise ValueError("associative_read: memory is None; an empty memory reads as 0, so skip the read")
    _check("associative_read", {"q": (q, "B T H d")}, memory)
    name = choose_assoc_memory_backend(backend)
    if not has_tokens(q):
        return empty_output(q, memory.matrix.shape[-1])
    return BACKENDS[name].read(q=q, memory=memory, normalize=normalize, eps=eps)


def associative_update(k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, memory: Memory | None = None, *,
                       normalize: bool = True, eps: float = EPS, backend: str = "auto") -> Memory:
    """The increments (dA, dz) that writing M tokens adds to `memory` (None or zeros: empty).

    k: (B, M, H, d) key projections; v: (B, M, H, Dv) values; beta: (B, M, H) write strengths in
    (0, 1). Each token is corrected by what the memory already returns for its key (v - v_bar),
    and adds to z only the part of its key the memory has not seen (gamma, not differentiated).
    Differentiable in k, v, beta and memory. Any B, M >= 0: writing no token adds zeros.

    Args:
        k: (B, M, H, d) key projections (before the feature map), any float dtype.
        v: (B, M, H, Dv) values.
        beta: (B, M, H) write strengths in (0, 1).
        memory: the Memory written to: matrix (B, H, 2*NU*d, Dv), normalizer (B, H, 2*NU*d);
            None: empty.
        normalize: L2-normalise the features phi(k), as ARMT does.
        eps: added to the denominator of the memory's read of each key.
        backend: "auto" ("chunkwise") or a key of BACKENDS ("reference", "chunkwise").

    Returns:
        The increments, a Memory: matrix (B, H, 2*NU*d, Dv), normalizer (B, H, 2*NU*d), fp32
            (fp64 for fp64 k); `memory.plus(...)` adds them.

    Raises:
        ValueError: memory is not a Memory; a tensor of the wrong shape (the memory's key width
            must be 2*NU*d), not floating point or on another device; an unknown backend.
    """
    sizes = _check("associative_update", {"k": (k, "B M H d"), "v": (v, "B M H Dv"), "beta": (beta, "B M H")}, memory)
    name = choose_assoc_memory_backend(backend)
    if not has_tokens(k):
        batch, heads, value_dim, key_dim = sizes["B"], sizes["H"], sizes["Dv"], 2 * NU * sizes["d"]
        return Memory(*carried_state(None, [(batch, heads, key_dim, value_dim), (batch, heads, key_dim)], k))
    return BACKENDS[name].update(k=k, v=v, beta=beta, memory=memory, normalize=normalize, eps=eps)


def choose_assoc_memory_backend(backend: str = "auto") -> str:
    """The backend a read or update runs: `backend`, or for "auto" "chunkwise" (a read or write is
    one segment's worth of batched work: no step loop is ever cheaper).

    Args:
        backend: "auto" or a key of BACKENDS ("reference", "chunkwise").

    Returns:
        The backend's name, a key of BACKENDS.

    Raises:
        ValueError: an unknown name (an old one with its new name as the did-you-mean).
    """
    return choose_backend("associative memory backend", backend, BACKENDS, lambda: "chunkwise", renamed=RENAMED)


def _check(op: str, layouts: dict, memory: Memory | None) -> dict[str, int]:
    """check_tensors on the projections and the memory, whose key width must be 2 * NU * d."""
    if memory is not None and not isinstance(memory, Memory):
        raise ValueError(f"{op}: memory must be a Memory (matrix, normalizer), got {type(memory).__name__}")
    if memory is not None:
        layouts = {**layouts, "memory.matrix": (memory.matrix, "B H F Dv"),
                   "memory.normalizer": (memory.normalizer, "B H F")}
    sizes = check_tensors(op, layouts)
    if memory is not None and sizes["F"] != 2 * NU * sizes["d"]:
        raise ValueError(f"{op}: the memory's key width must be 2*{NU}*d = {2 * NU * sizes['d']}, got {sizes['F']}")
    return sizes
