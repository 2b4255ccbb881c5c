"""The `model:` section: its schema, and its resolution into a ModelConfig.

Resolution checks each named mixer config against the mixer registry (the options its Options
dataclass declares, with their types and bounds, then the combinations its `check` refuses), expands `pattern` or `layers` into one layer
per index, and applies per-layer `overrides`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..blocks.projections import PROJECTION_INITS
from ..blocks.swiglu import ACTIVATIONS, ffn_hidden_size
from ..errors import OptionError, SpecError, did_you_mean, unknown_name_message
from ..options import Section, convert, option
from ..registry import get_mixer, list_mixers, read_options
from .config import LayerConfig, MixerConfig, ModelConfig
from .fields import located, read_section
from .yaml_source import KeyPath, Locations, fail


# Far beyond any model in use, and small enough that sizes stay exact in int64 and a spec never
# asks for a loop or an allocation the machine cannot finish.
MAX_WIDTH = 2**20
MAX_VOCAB = 2**24
MAX_LAYERS = 2**12
EXACTLY_ONE = "give exactly one of 'pattern' (cycled to n_layers) or 'layers' (one per layer)"


@dataclass(frozen=True)
class FFNSection(Section):
    """The gated FFN of a layer: its width `hidden`, else round_up(mult * d_model, multiple_of);
    its gate's activation (the model's: a per-layer override cannot change it)."""

    hidden: int | None = option(None, min=1, max=MAX_WIDTH)
    mult: float = option(8 / 3, above=0.0, max=64.0)
    multiple_of: int = option(64, min=1, max=MAX_WIDTH)
    activation: str = option("silu", choices=tuple(ACTIVATIONS),
                             help="the gate's activation: silu (SwiGLU), gelu_tanh (GeGLU, Gemma's gelu_pytorch_tanh)")

    def width(self, d_model: int) -> int:
        return self.hidden or ffn_hidden_size(d_model, self.mult, self.multiple_of)


@dataclass(frozen=True)
class NormSection(Section):
    """The RMSNorms of every block and the final norm."""

    eps: float = option(1e-6, above=0.0)
    post: bool = option(False, help="an RMSNorm also on each mixer's and FFN's output, before the residual add (Gemma)")


@dataclass(frozen=True)
class ModelSection(Section):
    """The `model:` section as written.

    mixers: named mixer configs, {name: {type: a registered mixer (default: the name), options...}};
    the layers cycle `pattern` to n_layers, or list one name per layer in `layers` (exactly one of
    the two). ffn: false for none, true or a mapping for a SwiGLU. overrides: {layer index
    (negative from the end): {mixer: another config name, ffn: ..., options...}}.
    """

    d_model: int = option(min=1, max=MAX_WIDTH)
    vocab_size: int = option(min=1, max=MAX_VOCAB)
    n_layers: int | None = option(None, min=1, max=MAX_LAYERS)
    mixers: dict = option(factory=dict)
    pattern: tuple[str, ...] | None = None
    layers: tuple[str, ...] | None = None
    ffn: FFNSection | bool = option(factory=FFNSection)
    norm: NormSection = option(factory=NormSection)
    tie_embeddings: bool = True
    init_std: float = option(0.02, above=0.0, help="std of the embedding (and an untied head), and of `normal` projections")
    projection_init: str = option("uniform", choices=PROJECTION_INITS,
                                  help="projection and short-convolution weights: uniform, PyTorch's U(±1/sqrt(fan_in)); "
                                       "normal, N(0, init_std) with zero biases (transformers' and fla's models)")
    logit_softcap: float | None = option(None, above=0.0)
    scale_embeddings: bool = option(False, help="multiply the token embeddings by sqrt(d_model), in their dtype (Gemma)")
    overrides: dict = option(factory=dict)


def read_model(mapping: Any, locations: Locations) -> ModelConfig:
    """Validate a spec's `model:` mapping and expand it into per-layer configs."""
    section = read_section(ModelSection, mapping, locations, ("model",))
    d_model = section.d_model
    mixers = resolve_mixers(section.mixers, locations)
    names = layer_names(section, mixers, locations)
    used = set(names) | {o.get("mixer") for o in section.overrides.values() if isinstance(o, dict)}
    for name in used & set(mixers):
        check_mixer_fits(mixers[name], d_model, locations, ("model", "mixers", name))
    default_ffn = ffn_width(section.ffn, d_model)
    activation = ffn_activation(section.ffn)
    layers = [LayerConfig(name, mixers[name].type, dict(mixers[name].options), default_ffn) for name in names]
    for index, override in section.overrides.items():
        apply_override(layers, index, override, mixers, d_model, activation, locations)
    return ModelConfig(
        d_model=d_model,
        vocab_size=section.vocab_size,
        layers=tuple(layers),
        mixers={name: mixers[name] for name in dict.fromkeys(layer.name for layer in layers)},
        ffn_hidden=default_ffn,
        norm_eps=section.norm.eps,
        tie_embeddings=section.tie_embeddings,
        init_std=section.init_std,
        projection_init=section.projection_init,
        logit_softcap=section.logit_softcap,
        post_norms=section.norm.post,
        ffn_activation=activation,
        scale_embeddings=section.scale_embeddings,
    )


def ffn_width(ffn: FFNSection | bool, d_model: int) -> int | None:
    """`false` -> no FFN (None); `true` or a section -> its hidden width."""
    if ffn is False:
        return None
    return (FFNSection() if ffn is True else ffn).width(d_model)


def ffn_activation(ffn: FFNSection | bool) -> str:
    """The FFN's activation: the section's, silu for `true` or `false`."""
    return ffn.activation if isinstance(ffn, FFNSection) else FFNSection().activation


def resolve_mixers(section: dict, locations: Locations) -> dict[str, MixerConfig]:
    """Named mixer configs: `type` (a registered mixer, default the name) plus checked options."""
    mixers = {}
    for name, body in section.items():
        path = ("model", "mixers", name)
        body = {} if body is None else body
        if not isinstance(body, dict):
            raise fail(locations, path, f"a mixer config must be a mapping of options, got {body!r}")
        options = dict(body)
        kind = options.pop("type", name)
        if kind not in list_mixers():
            where = path + ("type",) if "type" in body else path
            raise fail(locations, where, unknown_name_message("mixer", str(kind), list_mixers()))
        mixers[name] = MixerConfig(kind, complete_options(kind, options, locations, path))
    return mixers


def complete_options(kind: str, options: dict, locations: Locations, path: KeyPath) -> dict:
    """The complete options of a `kind` mixer, each declared option in its order, defaults filled
    in, every value checked against its declaration (type, bounds, choices)."""
    entry = get_mixer(kind)
    try:
        made = read_options(entry.cls, options)
    except OptionError as error:
        raise located(error, locations, path) from None
    return {key: getattr(made, key) for key in entry.options}


def check_mixer_fits(mixer: MixerConfig, d_model: int, locations: Locations, path: KeyPath) -> None:
    """The mixer's own checks of combinations (d_model divisible by heads...), for the configs in
    use: declared but unused configs skip them, so a spec can extend a base and change d_model
    without restating mixers it does not use."""
    try:
        get_mixer(mixer.type).check(d_model, **mixer.options)
    except OptionError as error:
        key = path + (error.key,)
        raise fail(locations, key if key in locations else path, error.message) from None


def layer_names(section: ModelSection, mixers: dict, locations: Locations) -> list[str]:
    """The mixer config name of each layer, from `pattern` (cycled) or `layers` (listed)."""
    if section.pattern is not None and section.layers is not None:
        raise both_layer_lists(locations)
    if section.pattern is None and section.layers is None:
        raise fail(locations, ("model",), EXACTLY_ONE)
    key = "pattern" if section.pattern is not None else "layers"
    names = getattr(section, key)
    if not names:
        raise fail(locations, ("model", key), "must name at least one mixer")
    for index, name in enumerate(names):
        if name not in mixers:
            declared = ", ".join(mixers) or "none"
            raise fail(locations, ("model", key, index),
                       f"{name!r} is not declared under model.mixers{did_you_mean(name, mixers)} (declared: {declared})")
    n_layers = section.n_layers
    if key == "pattern":
        if n_layers is None:
            raise fail(locations, ("model",), "missing required key 'n_layers' (the pattern is cycled to it)")
        return [names[i % len(names)] for i in range(n_layers)]
    if n_layers is not None and n_layers != len(names):
        last, first = locations.last_set(("model", "n_layers"), ("model", "layers"))
        if last == ("model", "n_layers") and locations.source(last) != locations.source(first):
            raise fail(locations, last, f"is {n_layers} but the layers inherited from {locations.where(first)} "
                                        f"list {len(names)}")
        raise fail(locations, ("model", "layers"), f"lists {len(names)} layers but n_layers is {n_layers}")
    if len(names) > MAX_LAYERS:
        raise fail(locations, ("model", "layers"), f"lists {len(names)} layers, more than {MAX_LAYERS}")
    return list(names)


def both_layer_lists(locations: Locations) -> SpecError:
    """The error of a model with both `pattern` and `layers`. When one is inherited (from a file the
    spec extends, or the file under a --set flag), it is located at the one set last, the user's,
    and says how to clear the other."""
    last, first = locations.last_set(("model", "pattern"), ("model", "layers"))
    if locations.source(last) == locations.source(first):
        return fail(locations, ("model",), EXACTLY_ONE)
    other = first[-1]
    clear = f"--set model.{other}=null" if locations.source(last).startswith("--set ") else f"`{other}: null` under model:"
    return fail(locations, last, f"'{other}' is inherited from {locations.where(first)}; a model takes 'pattern' "
                                 f"(cycled to n_layers) or 'layers' (one per layer), not both: clear it with {clear}")


def apply_override(layers: list[LayerConfig], index: Any, override: Any, mixers: dict, d_model: int,
                   activation: str, locations: Locations) -> None:
    """Replace one layer's mixer, options or FFN. Negative indices count from the end."""
    path = ("model", "overrides", index)
    if isinstance(index, bool) or not isinstance(index, int) or not -len(layers) <= index < len(layers):
        raise fail(locations, path, f"not a layer index of this {len(layers)}-layer model")
    if not isinstance(override, dict):
        raise fail(locations, path, f"expected a mapping of mixer/options/ffn, got {override!r}")
    override = dict(override)
    layer = layers[index]
    name = override.pop("mixer", layer.name)
    if name not in mixers:
        raise fail(locations, path + ("mixer",), f"{name!r} is not declared under model.mixers (declared: {', '.join(mixers)})")
    ffn = layer.ffn_hidden
    if "ffn" in override:
        given = override.pop("ffn")
        try:
            ffn = ffn_width(convert(given, FFNSection | bool, "ffn"), d_model)
        except OptionError as error:
            raise located(error, locations, path) from None
        if isinstance(given, dict) and given.get("activation", activation) != activation:
            raise fail(locations, path + ("ffn", "activation"), f"is {given['activation']!r}, but the FFN activation is "
                                                                f"the model's ({activation!r}): set it in model.ffn")
    options = dict(mixers[name].options) if name != layer.name else dict(layer.options)
    options.update(override)
    kind = mixers[name].type
    options = complete_options(kind, options, locations, path)
    check_mixer_fits(MixerConfig(kind, options), d_model, locations, path)
    layers[index] = LayerConfig(name, kind, options, ffn)
