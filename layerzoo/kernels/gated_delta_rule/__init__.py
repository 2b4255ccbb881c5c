"""The gated delta rule (Gated DeltaNet's recurrence) with interchangeable backends.

Shapes and semantics follow flash-linear-attention's `chunk_gated_delta_rule`, so either can
stand in for the other: q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H); state (B, H, K, V).
The public function and its backends: dispatch.py.
"""

from .dispatch import BACKENDS, PACKED, choose_gated_delta_rule_backend, gated_delta_rule
from .reference import gated_delta_rule_reference

__all__ = ["BACKENDS", "PACKED", "choose_gated_delta_rule_backend", "gated_delta_rule", "gated_delta_rule_reference"]
