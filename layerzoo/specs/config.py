"""The resolved model configuration a spec's `model:` section turns into: plain dataclasses.

Every layer's options are complete here (defaults filled in from the mixer's signature), so a
ModelConfig alone describes the architecture; `CausalLM(config)` builds it.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    """Everything a causal LM needs: what `layerzoo.build` resolves a `model:` section into.

    mixers: the named configs the layers start from (a layer's options may differ from its
    config's by per-layer overrides); ffn_hidden: the default FFN width (None: no FFN).
    The defaults of these fields live in the spec's sections (specs/model.py), not here.
    """

    d_model: int
    vocab_size: int
    layers: tuple[LayerConfig, ...]
    mixers: dict[str, MixerConfig]
    ffn_hidden: int | None
    norm_eps: float
    tie_embeddings: bool
    init_std: float
    projection_init: str
    logit_softcap: float | None

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
            "projection_init": self.projection_init,
            "logit_softcap": self.logit_softcap,
        }
        if overrides:
            model["overrides"] = overrides
        return model
