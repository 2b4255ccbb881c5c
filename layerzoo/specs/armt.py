"""The `armt:` and `base:` sections: segment-recurrent associative memory around a layer stack,
which is the spec's own `model:` or a Hugging Face checkpoint (`base:`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..errors import OptionError
from ..mixers.assoc_memory import AssociativeMemoryOptions
from ..options import Section, option

# The options of ARMT's memories, declared by the memory itself.
MEMORY_OPTIONS = ("d_mem", "n_heads", "normalize")


def memory_option(name: str) -> Any:
    """The field `name` of ARMTConfig as AssociativeMemoryOptions declares it (default, bounds, help)."""
    declared = next(item for item in dataclasses.fields(AssociativeMemoryOptions) if item.name == name)
    return dataclasses.field(default=declared.default, metadata=declared.metadata)


@dataclass(frozen=True)
class ARMTConfig(Section):
    """ARMT's settings: segments of `segment_size` tokens plus `num_mem_tokens` memory tokens, and
    an associative memory (d_mem key dims, n_heads heads) in some layers.

    Memory layers are given as `memory_layers` (indices, negative from the end) or as
    `memory_pattern` (booleans cycled over the layers), exactly one; both stay as written, since a
    wrapped checkpoint's layer count is only known when it is loaded (`layer_indices` resolves).
    truncate_segments K: memory gradients flow across the last K segments of a call only;
    checkpoint_segments: recompute each segment in the backward instead of storing it.
    """

    segment_size: int = option(min=1, max=2**24)
    num_mem_tokens: int = option(min=1, max=2**16)
    d_mem: int = memory_option("d_mem")
    memory_layers: tuple[int, ...] | None = None
    memory_pattern: tuple[bool, ...] | None = None
    n_heads: int = memory_option("n_heads")
    normalize: bool = memory_option("normalize")
    truncate_segments: int | None = option(None, min=1)
    checkpoint_segments: bool = False

    def validate(self) -> None:
        AssociativeMemoryOptions(**self.memory_options())  # the memory's own checks (d_mem divisible by n_heads)
        if (self.memory_layers is None) == (self.memory_pattern is None):
            raise OptionError("memory_layers", "give exactly one of memory_layers (layer indices) or memory_pattern "
                                               "(booleans cycled over the layers)")
        if self.memory_pattern == ():
            raise OptionError("memory_pattern", "memory_pattern must list at least one entry")

    def memory_options(self) -> dict[str, Any]:
        """The options of each memory layer (an AssociativeMemory), its segments ARMT's."""
        return {"segment_size": self.segment_size, **{name: getattr(self, name) for name in MEMORY_OPTIONS}}

    def layer_indices(self, n_layers: int) -> tuple[int, ...]:
        """The memory layers of an n_layers stack, ascending and non-negative."""
        if self.memory_pattern is not None:
            return tuple(i for i in range(n_layers) if self.memory_pattern[i % len(self.memory_pattern)])
        seen = set()
        for position, index in enumerate(self.memory_layers):
            if not -n_layers <= index < n_layers:
                raise OptionError(f"memory_layers.{position}", f"memory layer {index} is not a layer index of a {n_layers}-layer model")
            if index % n_layers in seen:
                raise OptionError(f"memory_layers.{position}", f"memory layer {index % n_layers} is listed twice")
            seen.add(index % n_layers)
        return tuple(sorted(seen))

    def to_dict(self) -> dict[str, Any]:
        """The `armt:` section that gives back exactly this config (the one placement given)."""
        data = super().to_dict()
        del data["memory_pattern" if self.memory_layers is not None else "memory_layers"]
        return data


@dataclass(frozen=True)
class BaseSection(Section):
    """The `base:` section: the local directory of a Hugging Face checkpoint (save_pretrained)
    that an `armt:` section wraps in place of a `model:`, and whether its weights train."""

    hf_checkpoint: str = option(help="the save_pretrained directory of the base model (never downloaded)")
    train: bool = option(False, help="train the base's weights too; false: frozen, only the memory trains")
