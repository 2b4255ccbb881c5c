"""Attention and recurrence kernels shared by the mixers."""

from .sliding_window import (
    choose_sliding_window_backend,
    sliding_window_attention,
    sliding_window_attention_reference,
)
from .gated_delta_rule import choose_gated_delta_rule_backend, gated_delta_rule, gated_delta_rule_reference
from .mlstm import MLSTMState, choose_mlstm_backend, mlstm, mlstm_reference
from .ssd import choose_ssd_backend, ssd, ssd_reference
from .kda import choose_kda_backend, kda, kda_reference
from .assoc_memory import Memory, associative_read, associative_update, choose_assoc_memory_backend

__all__ = [
    "choose_sliding_window_backend",
    "sliding_window_attention",
    "sliding_window_attention_reference",
    "choose_gated_delta_rule_backend",
    "gated_delta_rule",
    "gated_delta_rule_reference",
    "MLSTMState",
    "choose_mlstm_backend",
    "mlstm",
    "mlstm_reference",
    "choose_ssd_backend",
    "ssd",
    "ssd_reference",
    "choose_kda_backend",
    "kda",
    "kda_reference",
    "Memory",
    "associative_read",
    "associative_update",
    "choose_assoc_memory_backend",
]
