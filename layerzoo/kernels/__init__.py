"""Attention and recurrence kernels shared by the mixers."""

from .sliding_window import (
    choose_swa_backend,
    sliding_window_attention,
    sliding_window_attention_reference,
)

__all__ = [
    "choose_swa_backend",
    "sliding_window_attention",
    "sliding_window_attention_reference",
]
