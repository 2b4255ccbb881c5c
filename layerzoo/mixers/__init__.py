"""Token mixers, one file each, registered by name on import."""

from .base import Mixer, OptionError
from .attention import Attention, SlidingWindowAttention, KVCache

__all__ = ["Mixer", "OptionError", "Attention", "SlidingWindowAttention", "KVCache"]
