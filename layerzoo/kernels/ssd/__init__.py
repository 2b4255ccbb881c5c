"""SSD: linear attention with a scalar decay per head and step, with interchangeable backends.

The state-space duality form of Mamba-2's recurrence, in flash-linear-attention's `simple_gla`
semantics, so either can stand in for the other: q, k (B, T, H, K); v (B, T, H, V); g (B, T, H)
in log space; state (B, H, K, V). The public function and its backends: dispatch.py.
"""

from .dispatch import BACKENDS, PACKED, choose_ssd_backend, ssd
from .reference import ssd_reference

__all__ = ["BACKENDS", "PACKED", "choose_ssd_backend", "ssd", "ssd_reference"]
