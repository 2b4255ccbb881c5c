"""Spec files -> ModelConfig: `extends` chains, deep merges, --set overrides, validation."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from ..errors import did_you_mean, unknown_name_message
from ..mixers.base import OptionError
from ..registry import get_mixer, list_mixers
from ..blocks.swiglu import ffn_hidden_size
from .config import ARMTConfig, LayerConfig, MixerConfig, ModelConfig
from .options import check_type, type_name
from .yaml_source import KeyPath, Locations, SpecError, fail, read_yaml_file

SHIPPED_DIR = Path(__file__).parent / "shipped"

TOP_KEYS = {"name": str, "description": str, "extends": str, "model": dict, "training": dict, "armt": dict, "base": dict}
MODEL_KEYS = {
    "d_model": int, "n_layers": int, "vocab_size": int, "mixers": dict, "pattern": list, "layers": list,
    "ffn": (dict, bool), "norm": dict, "tie_embeddings": bool, "init_std": float,
    "logit_softcap": (float, type(None)), "overrides": dict,
}
FFN_KEYS = {"hidden": (int, type(None)), "mult": float, "multiple_of": int}
NORM_KEYS = {"eps": float}
ARMT_KEYS = {
    # null unsets an extended spec's choice, to switch between indices and a pattern
    "segment_size": int, "num_mem_tokens": int, "d_mem": int, "memory_layers": (list, type(None)),
    "memory_pattern": (list, type(None)),
    "n_heads": int, "normalize": bool, "truncate_segments": (int, type(None)), "checkpoint_segments": bool,
}
BASE_KEYS = {"hf_checkpoint": str}


def shipped_specs() -> list[str]:
    """Names of the specs that ship with layerzoo."""
    return sorted(path.stem for path in SHIPPED_DIR.glob("*.yaml"))


def shipped_path(name: str) -> Path:
    path = SHIPPED_DIR / f"{name}.yaml"
    if not path.is_file():
        raise SpecError(unknown_name_message("spec", name, shipped_specs()))
    return path


def locate(spec: str | Path, relative_to: Path | None = None) -> Path:
    """A spec argument -> its file: an existing path (relative to the extending file), else a shipped name."""
    candidate = Path(spec)
    if relative_to is not None and not candidate.is_absolute():
        candidate = relative_to / candidate
    if candidate.is_file():
        return candidate
    if str(spec).endswith((".yaml", ".yml")) or "/" in str(spec):
        raise SpecError(f"{spec}: no such spec file")
    return shipped_path(str(spec))


def load_raw(path: Path, chain: tuple[Path, ...] = ()) -> tuple[dict, Locations]:
    """Read a spec file with its `extends` chain deep-merged underneath it."""
    if path.resolve() in chain:
        cycle = " -> ".join(str(p) for p in chain + (path.resolve(),))
        raise SpecError(f"{path}: extends cycle: {cycle}")
    data, locations = read_yaml_file(path)
    if not isinstance(data, dict):
        raise fail(locations, (), f"a spec must be a mapping, got {type(data).__name__}")
    parent = data.get("extends")
    if parent is None:
        return data, locations
    if not isinstance(parent, str):
        raise fail(locations, ("extends",), "must be a spec name or a path")
    try:
        base_path = locate(parent, relative_to=path.parent)
    except SpecError as error:
        raise fail(locations, ("extends",), str(error)) from None
    base, base_locations = load_raw(base_path, chain + (path.resolve(),))
    base.pop("name", None)  # a name belongs to its own file
    child = {key: value for key, value in data.items() if key != "extends"}
    return deep_merge(base, child, base_locations, locations)


def deep_merge(base: dict, override: dict, base_locations: Locations, override_locations: Locations,
               path: KeyPath = ()) -> tuple[dict, Locations]:
    """Mappings merge key by key; anything else (lists included) is replaced whole."""
    merged = copy.deepcopy(base)
    locations = Locations(base_locations)
    for key, value in override.items():
        here = path + (key,)
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key], locations = deep_merge(merged[key], value, locations, override_locations, here)
        else:
            merged[key] = copy.deepcopy(value)
            for old in [p for p in locations if p[: len(here)] == here]:
                del locations[old]
        for p, where in override_locations.items():
            if p[: len(here)] == here and (p not in locations or not isinstance(value, dict)):
                locations[p] = where
    return merged, locations


def apply_set(data: dict, locations: Locations, assignment: str) -> None:
    """Apply one `dotted.key=value` override in place; the value is parsed as YAML."""
    key, sep, text = assignment.partition("=")
    if not sep or not key.strip():
        raise SpecError(f"--set {assignment}: expected KEY=VALUE, e.g. model.d_model=256")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        raise SpecError(f"--set {assignment}: the value is not valid YAML") from None
    parts = [int(p) if p.lstrip("-").isdigit() else p for p in key.strip().split(".")]
    target = data
    for depth, part in enumerate(parts[:-1]):
        target = target.setdefault(part, {})
        if not isinstance(target, dict):
            raise SpecError(f"--set {assignment}: {'.'.join(map(str, parts[: depth + 1]))} is not a mapping")
    target[parts[-1]] = value
    here = tuple(parts)
    for old in [p for p in locations if p[: len(here)] == here]:
        del locations[old]
    locations[here] = f"--set {assignment}"


def check_keys(section: dict, allowed: dict, locations: Locations, path: KeyPath) -> None:
    """Unknown keys (with a close match) and wrong types of a fixed-schema mapping."""
    for key, value in section.items():
        if key not in allowed:
            raise fail(locations, path + (key,), f"unknown key{did_you_mean(key, allowed)} (known: {', '.join(allowed)})")
        expected = allowed[key]
        if expected is float:
            ok, section[key] = check_type(value, float)
        elif expected is int:
            ok = isinstance(value, int) and not isinstance(value, bool)
        else:
            ok = isinstance(value, expected)
        if not ok:
            names = " or ".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
            raise fail(locations, path + (key,), f"expected {names.replace('NoneType', 'null')}, got {value!r}")
        if expected is int and value < 1:
            raise fail(locations, path + (key,), f"must be >= 1, got {value}")


def resolve_model(model: dict, locations: Locations) -> ModelConfig:
    """Validate the `model:` section and expand it into per-layer configs."""
    path = ("model",)
    check_keys(model, MODEL_KEYS, locations, path)
    for key in ("d_model", "vocab_size"):
        if key not in model:
            raise fail(locations, path, f"missing required key {key!r}")
    d_model = model["d_model"]
    mixers = resolve_mixers(model.get("mixers", {}), d_model, locations)
    names = layer_names(model, mixers, locations)
    used = set(names) | {o.get("mixer") for o in model.get("overrides", {}).values() if isinstance(o, dict)}
    for name in used & set(mixers):
        check_mixer_fits(mixers[name], d_model, locations, ("model", "mixers", name))
    default_ffn = resolve_ffn(model.get("ffn", {}), d_model, locations, path + ("ffn",))
    layers = [LayerConfig(name, mixers[name].type, dict(mixers[name].options), default_ffn) for name in names]
    for index, override in model.get("overrides", {}).items():
        apply_override(layers, index, override, mixers, d_model, default_ffn, locations)
    norm = model.get("norm", {})
    check_keys(norm, NORM_KEYS, locations, path + ("norm",))
    return ModelConfig(
        d_model=d_model,
        vocab_size=model["vocab_size"],
        layers=tuple(layers),
        mixers={name: mixers[name] for name in dict.fromkeys(layer.name for layer in layers)},
        ffn_hidden=default_ffn,
        norm_eps=norm.get("eps", 1e-6),
        tie_embeddings=model.get("tie_embeddings", True),
        init_std=model.get("init_std", 0.02),
        logit_softcap=model.get("logit_softcap"),
    )


def resolve_mixers(section: dict, d_model: int, locations: Locations) -> dict[str, MixerConfig]:
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
        mixers[name] = MixerConfig(kind, check_mixer_options(kind, options, locations, path))
    return mixers


def check_mixer_options(kind: str, options: dict, locations: Locations, path: KeyPath) -> dict:
    """Known keys and right types; returns the complete options with defaults filled in."""
    known = get_mixer(kind).options
    complete = {}
    for key, value in options.items():
        if key not in known:
            raise fail(locations, path + (key,),
                       f"unknown option of mixer {kind!r}{did_you_mean(key, known)} (options: {', '.join(known)})")
        ok, complete[key] = check_type(value, known[key].annotation)
        if not ok:
            raise fail(locations, path + (key,), f"expected {type_name(known[key].annotation)}, got {value!r}")
    for key, info in known.items():
        if key not in complete:
            if info.required:
                raise fail(locations, path, f"mixer {kind!r} needs option {key!r}")
            complete[key] = info.default
    return {key: complete[key] for key in known}


def check_mixer_fits(mixer: MixerConfig, d_model: int, locations: Locations, path: KeyPath) -> None:
    """The mixer's own cross-option checks (d_model divisible by heads...), for configs in use.

    Declared but unused configs skip this, so a spec can extend a base and change d_model
    without restating mixers it does not use.
    """
    try:
        get_mixer(mixer.type).cls.check_options(d_model, **mixer.options)
    except OptionError as error:
        key = path + (error.key,)
        raise fail(locations, key if key in locations else path, str(error)) from None


def layer_names(model: dict, mixers: dict, locations: Locations) -> list[str]:
    """The mixer config name of each layer, from `pattern` (cycled) or `layers` (listed)."""
    if ("pattern" in model) == ("layers" in model):
        raise fail(locations, ("model",), "give exactly one of 'pattern' (cycled to n_layers) or 'layers' (one per layer)")
    key = "pattern" if "pattern" in model else "layers"
    names = model[key]
    if not names:
        raise fail(locations, ("model", key), "must name at least one mixer")
    for index, name in enumerate(names):
        if name not in mixers:
            declared = ", ".join(mixers) or "none"
            hint = did_you_mean(name, mixers)
            raise fail(locations, ("model", key, index),
                       f"{name!r} is not declared under model.mixers{hint} (declared: {declared})")
    n_layers = model.get("n_layers")
    if key == "pattern":
        if n_layers is None:
            raise fail(locations, ("model",), "missing required key 'n_layers' (the pattern is cycled to it)")
        return [names[i % len(names)] for i in range(n_layers)]
    if n_layers is not None and n_layers != len(names):
        raise fail(locations, ("model", "layers"), f"lists {len(names)} layers but n_layers is {n_layers}")
    return list(names)


def resolve_ffn(section: Any, d_model: int, locations: Locations, path: KeyPath) -> int | None:
    """`false` -> no FFN; a mapping -> hidden width (explicit, or round_up(mult * d_model, multiple_of))."""
    if section is False or section is None:
        return None
    if section is True:
        section = {}
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping or false, got {section!r}")
    section = dict(section)
    check_keys(section, FFN_KEYS, locations, path)
    if section.get("hidden") is not None:
        if section["hidden"] < 1:
            raise fail(locations, path + ("hidden",), f"must be >= 1, got {section['hidden']}")
        return section["hidden"]
    return ffn_hidden_size(d_model, section.get("mult", 8 / 3), section.get("multiple_of", 64))


def apply_override(layers: list[LayerConfig], index: Any, override: Any, mixers: dict, d_model: int,
                   default_ffn: int | None, locations: Locations) -> None:
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
    ffn = resolve_ffn(override.pop("ffn"), d_model, locations, path + ("ffn",)) if "ffn" in override else layer.ffn_hidden
    options = dict(mixers[name].options) if name != layer.name else dict(layer.options)
    options.update(override)
    kind = mixers[name].type
    options = check_mixer_options(kind, options, locations, path)
    check_mixer_fits(MixerConfig(kind, options), d_model, locations, path)
    layers[index] = LayerConfig(name, kind, options, ffn)


def resolve_armt(section: dict, locations: Locations, model: ModelConfig | None) -> ARMTConfig:
    """Validate the `armt:` section; against the model's layers and width when it has a `model:`."""
    path = ("armt",)
    check_keys(section, ARMT_KEYS, locations, path)
    for key in ("segment_size", "num_mem_tokens"):
        if key not in section:
            raise fail(locations, path, f"missing required key {key!r}")
    try:
        config = ARMTConfig(**section)
        if model is not None:
            config.layer_indices(model.n_layers)
            get_mixer("assoc_memory").cls.check_options(model.d_model, d_mem=config.d_mem, n_heads=config.n_heads)
    except OptionError as error:
        key = path + tuple(int(part) if part.isdigit() else part for part in error.key.split("."))
        raise fail(locations, key if key in locations else path, str(error)) from None
    return config


def resolve_base(section: dict, locations: Locations) -> str:
    """The `base:` section: the directory of a Hugging Face checkpoint (save_pretrained) to wrap."""
    check_keys(section, BASE_KEYS, locations, ("base",))
    if "hf_checkpoint" not in section:
        raise fail(locations, ("base",), "missing required key 'hf_checkpoint' (a save_pretrained directory)")
    return section["hf_checkpoint"]
