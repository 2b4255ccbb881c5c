"""Token mixers, one file each, registered by name when imported (the registry's first lookup does)."""

from .base import Mixer, MixerOptions
from .attention import Attention, KVCache, SlidingWindowAttention
from .gated_deltanet import GatedDeltaNet, GatedDeltaNetState
from .kda import KimiDeltaAttention
from .mamba2 import Mamba2, Mamba2State
from .mlstm import MLSTM
from .assoc_memory import AssociativeMemory, AssocMemoryState
from .window import at_window, set_window

__all__ = [
    "AssocMemoryState", "AssociativeMemory", "Attention", "GatedDeltaNet", "GatedDeltaNetState", "KVCache",
    "KimiDeltaAttention", "MLSTM", "Mamba2", "Mamba2State", "Mixer", "MixerOptions", "SlidingWindowAttention", "at_window", "set_window",
]
