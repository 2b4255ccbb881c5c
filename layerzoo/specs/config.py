"""The resolved model configuration a spec's `model:` section turns into: plain dataclasses.

Every layer's options are complete here (defaults filled in from the mixer's signature), so a
ModelConfig alone describes the architecture; `CausalLM(config)` builds it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Sequence


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
    The defaults of these fields live in the spec's sections (specs/model.py), not here, but
    for the last three (Gemma's: norms after each sub-block too, the FFN's activation, embeddings
    times sqrt(d_model)), whose defaults leave every other model as it was.
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
    post_norms: bool = False
    ffn_activation: str = "silu"
    scale_embeddings: bool = False

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def with_layer_options(self, options: Sequence[Any]) -> ModelConfig:
        """This config with layer i's options read from options[i] (an object with an attribute per
        option: its mixer's `options`). A named mixer config takes a value that changed when every
        layer of its name has it; a layer that differs keeps its own (an override). Itself when
        nothing changed."""
        layers = []
        for layer, given in zip(self.layers, options):
            changed = {key: getattr(given, key) for key, value in layer.options.items() if getattr(given, key) != value}
            layers.append(dataclasses.replace(layer, options={**layer.options, **changed}) if changed else layer)
        if all(new is old for new, old in zip(layers, self.layers)):
            return self
        mixers = {}
        for name, mixer in self.mixers.items():
            named = [(old.options, new.options) for old, new in zip(self.layers, layers) if old.name == name]
            taken = {}
            for key in {key for old, new in named for key in new if new[key] != old[key]}:
                values = [new[key] for _, new in named]
                if all(value == values[0] for value in values):
                    taken[key] = values[0]
            mixers[name] = dataclasses.replace(mixer, options={**mixer.options, **taken}) if taken else mixer
        return dataclasses.replace(self, layers=tuple(layers), mixers=mixers)

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
        if self.post_norms:  # the Gemma options only when set: every other model's section stays as it was
            model["norm"]["post"] = True
        if self.ffn_activation != "silu" and self.ffn_hidden:
            model["ffn"]["activation"] = self.ffn_activation
        if self.scale_embeddings:
            model["scale_embeddings"] = True
        if overrides:
            model["overrides"] = overrides
        return model
