"""The resolved model configuration a spec file turns into: plain dataclasses, no YAML."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


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
