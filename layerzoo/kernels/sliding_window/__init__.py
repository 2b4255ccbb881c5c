"""Sliding-window (local causal) attention with interchangeable backends.

Layout follows flash-linear-attention: q (B, Tq, H, D), k and v (B, Tk, Hkv, D). Queries are
aligned to the end of the keys (flash-attn's bottom-right convention), so streaming passes
keys = [cached keys; new keys] and queries = the new tokens only. The public function and its
backends: dispatch.py.
"""

from .dispatch import BACKENDS, PACKED, SINKS, choose_sliding_window_backend, sliding_window_attention
from .native import native_enabled
from .reference import sliding_window_attention_reference, sliding_window_mask

__all__ = [
    "BACKENDS",
    "PACKED",
    "SINKS",
    "choose_sliding_window_backend",
    "native_enabled",
    "sliding_window_attention",
    "sliding_window_attention_reference",
    "sliding_window_mask",
]
