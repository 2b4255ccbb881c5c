"""Token mixers, one file each, registered by name on import."""

from .base import Mixer, OptionError
from .attention import Attention, SlidingWindowAttention, KVCache
from .gated_deltanet import GatedDeltaNet, GatedDeltaNetState
from .mlstm import MLSTM
from .assoc_memory import AssociativeMemory, AssocMemoryState  # noqa: F401

__all__ = ["Mixer", "OptionError", "Attention", "SlidingWindowAttention", "KVCache", "GatedDeltaNet", "GatedDeltaNetState", "MLSTM"]
