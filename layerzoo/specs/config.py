"""The resolved model configuration a spec file turns into: plain dataclasses, no YAML."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..mixers.base import OptionError


@dataclass(frozen=True)
class MixerConfig:
    """A named mixer configuration: a registered mixer type and its complete options."""

    type: str
    options: dict[str, Any]


@dataclass(frozen=True)
class LayerConfig:
    """One layer: the mixer config it came from (`name`), its final options, its FFN width.

    ffn_hidden None means the layer has no FFN.
    """

    name: str
    type: str
    options: dict[str, Any]
    ffn_hidden: int | None


@dataclass(frozen=True)
class ModelConfig:
    """Everything `layerzoo.build` needs for a causal LM."""

    d_model: int
    vocab_size: int
    layers: tuple[LayerConfig, ...]
    mixers: dict[str, MixerConfig] = field(default_factory=dict)  # the configs the layers start from
    ffn_hidden: int | None = None
    norm_eps: float = 1e-6
    tie_embeddings: bool = True
    init_std: float = 0.02
    logit_softcap: float | None = None

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def to_dict(self) -> dict[str, Any]:
        """The spec `model:` section that resolves back to exactly this config."""
        overrides = {}
        for index, layer in enumerate(self.layers):
            base = self.mixers[layer.name].options
            changed = {k: v for k, v in layer.options.items() if base.get(k) != v}
            if layer.ffn_hidden != self.ffn_hidden:
                changed["ffn"] = {"hidden": layer.ffn_hidden} if layer.ffn_hidden else False
            if changed:
                overrides[index] = changed
        model = {
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "vocab_size": self.vocab_size,
            "mixers": {name: {"type": self.mixers[name].type, **self.mixers[name].options} for name in self.mixers},
            "layers": [layer.name for layer in self.layers],
            "ffn": {"hidden": self.ffn_hidden} if self.ffn_hidden else False,
            "norm": {"eps": self.norm_eps},
            "tie_embeddings": self.tie_embeddings,
            "init_std": self.init_std,
            "logit_softcap": self.logit_softcap,
        }
        if overrides:
            model["overrides"] = overrides
        return model


@dataclass(frozen=True)
class ARMTConfig:
    """The `armt:` section: segment-recurrent associative memory around a layer stack.

    Memory layers are given as `memory_layers` (indices, negative from the end) or as
    `memory_pattern` (booleans cycled over the layers), exactly one; both stay as written, since a
    wrapped checkpoint's layer count is only known when it is loaded (`layer_indices` resolves).
    Raises OptionError (with the offending key) for values no model can take.
    """

    segment_size: int
    num_mem_tokens: int
    d_mem: int = 64
    memory_layers: tuple[int, ...] | None = None
    memory_pattern: tuple[bool, ...] | None = None
    n_heads: int = 1
    normalize: bool = True
    truncate_segments: int | None = None
    checkpoint_segments: bool = False

    def __post_init__(self) -> None:
        for key in ("segment_size", "num_mem_tokens", "d_mem", "n_heads", "truncate_segments"):
            value = getattr(self, key)
            if key == "truncate_segments" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise OptionError(key, f"{key} must be an integer >= 1, got {value!r}")
        if self.d_mem % self.n_heads:
            raise OptionError("n_heads", f"d_mem {self.d_mem} is not divisible by n_heads {self.n_heads}")
        if (self.memory_layers is None) == (self.memory_pattern is None):
            raise OptionError("memory_layers", "give exactly one of memory_layers (layer indices) or memory_pattern "
                                               "(booleans cycled over the layers)")
        for key, kind in (("memory_layers", int), ("memory_pattern", bool)):
            value = getattr(self, key)
            if value is None:
                continue
            object.__setattr__(self, key, tuple(value))  # lists from YAML or callers; frozen and hashable
            for index, item in enumerate(getattr(self, key)):
                if isinstance(item, bool) != (kind is bool) or not isinstance(item, int):
                    raise OptionError(f"{key}.{index}", f"{key} expects {'true or false' if kind is bool else 'layer indices'}, got {item!r}")
        if self.memory_pattern == ():
            raise OptionError("memory_pattern", "memory_pattern must list at least one entry")

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
        """The spec `armt:` section that gives back exactly this config."""
        data = dataclasses.asdict(self)
        given = "memory_layers" if self.memory_layers is not None else "memory_pattern"
        del data["memory_pattern" if given == "memory_layers" else "memory_layers"]
        data[given] = list(data[given])  # YAML has no tuples
        return data
