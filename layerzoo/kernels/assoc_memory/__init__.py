"""ARMT's associative memory as two pure ops: read (every token) and update (a write's increments).

Layout follows flash-linear-attention: projections (B, T, H, d). The state is `Memory(matrix,
normalizer)` = (A, z), fp32. Writing tokens is `memory.plus(associative_update(k, v, beta, memory))`;
updates computed against the same memory add up, which is how a segment is written in pieces.
The public ops and their backends: dispatch.py.

No cu_seqlens, unlike the sequence kernels: their state advances token by token, so packed
sequences only need it to restart at each boundary. Here every token of a call reads, and writes
against, the one memory of its batch row as it stood at the segment's start: a call is one
segment of one sequence by construction, and sequences of different lengths are separate rows
(ARMT splits each into its own segments).
"""

from .dispatch import BACKENDS, EPS, RENAMED, associative_read, associative_update, choose_assoc_memory_backend
from .feature_map import NU, dpfp, features
from .memory import Memory, empty_memory
from .reference import associative_read_reference, associative_update_reference

__all__ = [
    "BACKENDS", "EPS", "Memory", "NU", "RENAMED", "associative_read", "associative_read_reference",
    "associative_update", "associative_update_reference", "choose_assoc_memory_backend", "dpfp", "empty_memory",
    "features",
]
