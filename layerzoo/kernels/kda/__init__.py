"""KDA (Kimi Delta Attention's recurrence): the gated delta rule with a decay per key channel,
with interchangeable backends.

Shapes and semantics follow flash-linear-attention's `chunk_kda`, so either can stand in for the
other: q, k (B, T, H, K); v (B, T, H, V); g (B, T, H, K) in log space; beta (B, T, H); state
(B, H, K, V); q and k used as given (the KDA mixer L2-normalises them, as fla's layer asks its
kernel to). The public function and its backends: dispatch.py.
"""

from .dispatch import BACKENDS, PACKED, choose_kda_backend, kda
from .reference import kda_reference

__all__ = ["BACKENDS", "PACKED", "choose_kda_backend", "kda", "kda_reference"]
