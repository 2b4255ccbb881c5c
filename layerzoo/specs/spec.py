"""`Spec`: a loaded, validated spec file, and `load_spec` to get one from a name, path or dict."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..errors import OptionError, did_you_mean
from ..options import Section
from .armt import ARMTConfig, BaseSection
from .config import MixerConfig, ModelConfig
from .fields import located, read_section
from .files import apply_set, deep_merge, load_raw, locate
from .model import check_mixer_fits, complete_options, read_model
from .sections import section_readers
from .yaml_source import Locations, fail, read_yaml


@dataclass(frozen=True)
class Spec:
    """A validated spec: the model config plus its name and where it came from.

    An ARMT spec adds `armt`, around either `model` (a stack built from scratch) or `hf_checkpoint`
    (a Hugging Face save_pretrained directory, the `base:` section; `model` is then None).
    `sections` holds the validated sections that layers above specs own, by key (`training`).

    Attributes:
        model: the resolved ModelConfig, or None for ARMT around a checkpoint.
        name: the spec's `name:`, or None.
        description: its `description:`, or None.
        source: where it was read from: the file's path, or "<dict>"; None for a Spec made in Python.
        armt: the ARMTConfig of an `armt:` section, or None.
        hf_checkpoint: the `base:` checkpoint directory, or None.
        train_base: the `base:` section's `train`: the checkpoint's weights train too (else frozen).
        sections: the other validated sections by key (`training`: a TrainingConfig).
    """

    model: ModelConfig | None
    name: str | None = None
    description: str | None = None
    source: str | None = None
    armt: ARMTConfig | None = None
    hf_checkpoint: str | None = None
    train_base: bool = False
    sections: dict[str, Any] = field(default_factory=dict)

    @property
    def training(self) -> Any:
        """The `training:` section (a layerzoo.training.TrainingConfig), or None."""
        return self.sections.get("training")

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec (no `extends`, every option explicit): loading it gives this Spec's model."""
        data: dict[str, Any] = {}
        if self.name:
            data["name"] = self.name
        if self.description:
            data["description"] = self.description
        if self.hf_checkpoint is not None:
            data["base"] = {"hf_checkpoint": self.hf_checkpoint, "train": self.train_base}
        if self.model is not None:
            data["model"] = self.model.to_dict()
        if self.armt is not None:
            data["armt"] = self.armt.to_dict()
        for key, section in self.sections.items():
            data[key] = section.to_dict()
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_yaml())


@dataclass(frozen=True)
class SpecFile(Section):
    """A spec's top level. `model`, `armt` and `base` are read by their own sections below; the
    keys of other layers' sections (`training`) are checked by the readers they register."""

    name: str | None = None
    description: str | None = None
    extends: str | None = None
    model: dict | None = None
    armt: dict | None = None
    base: dict | None = None


def load_spec(spec: str | Path | dict | Spec, overrides: Iterable[str] = ()) -> Spec:
    """A Spec from a shipped name ("swa-full"), a YAML path, a dict or a Spec.

    overrides: `dotted.key=value` strings, as `--set` on the command line, applied last.
    Raises SpecError whose message names the file, the line and the key.

    Args:
        spec: a shipped spec's name (see `shipped_specs`), a path to a YAML file (its `extends`
            chain merged underneath it), a dict of a spec's contents, or a Spec (returned as it
            is when there are no overrides).
        overrides: `dotted.key=value` strings (`model.d_model=256`, `model.mixers.swa.window=64`),
            each value read as YAML.

    Returns:
        The validated Spec: `model` (a ModelConfig with every mixer option resolved), `name`,
            `description`, `source`, and `armt` / `hf_checkpoint` for an ARMT spec.

    Raises:
        SpecError: the spec cannot be found or read, or a key or value in it (or in an
            override) is wrong; the message starts with `file:line: key:`.
    """
    overrides = list(overrides)
    if isinstance(spec, Spec):
        if not overrides:
            return spec
        spec = spec.to_dict()
    if isinstance(spec, dict):
        data, locations, source = _from_dict(spec)
    else:
        path = locate(spec)
        data, locations = load_raw(path)
        source = str(path)
    return read_spec(data, locations, source, overrides)


def read_spec(data: dict, locations: Locations, source: str, overrides: Iterable[str] = ()) -> Spec:
    """A Spec from a spec's raw data (its `extends` already merged in) and where each key was set:
    for callers that assemble the data themselves (a distillation's student model under the
    user's `distill:` file). overrides: `dotted.key=value` strings, applied to the data before it is read."""
    for assignment in overrides:
        apply_set(data, locations, assignment)
    readers = section_readers()
    own = [item.name for item in dataclasses.fields(SpecFile)]
    for key in data:
        if key not in own and key not in readers:
            known = own + list(readers)
            raise fail(locations, (key,), f"unknown key{did_you_mean(str(key), known)} (known: {', '.join(known)})")
    top = read_section(SpecFile, {key: value for key, value in data.items() if key in own}, locations, ())
    base = read_section(BaseSection, top.base, locations, ("base",)) if top.base is not None else None
    hf_checkpoint = None if base is None else base.hf_checkpoint
    if hf_checkpoint is not None and (top.model is not None or top.armt is None):
        raise fail(locations, ("base",), "a 'base' checkpoint is wrapped by an 'armt' section and replaces 'model'")
    if top.model is None and hf_checkpoint is None:
        raise fail(locations, (), "missing required section 'model'")
    model = read_model(top.model, locations) if top.model is not None else None
    return Spec(
        model=model,
        armt=read_armt(top.armt, locations, model) if top.armt is not None else None,
        hf_checkpoint=hf_checkpoint,
        train_base=base is not None and base.train,
        sections={key: reader(data[key], locations, model) for key, reader in readers.items() if key in data},
        name=top.name or (Path(source).stem if source and source.endswith((".yaml", ".yml")) else None),
        description=top.description,
        source=source,
    )


def read_armt(mapping: Any, locations: Locations, model: ModelConfig | None) -> ARMTConfig:
    """The `armt:` section; checked against the model's layers and width when the spec has a `model:`."""
    path = ("armt",)
    config = read_section(ARMTConfig, mapping, locations, path)
    if model is not None:
        try:
            config.layer_indices(model.n_layers)
        except OptionError as error:
            raise located(error, locations, path) from None
        memory = {"segment_size": config.segment_size, "d_mem": config.d_mem, "n_heads": config.n_heads,
                  "normalize": config.normalize}
        options = complete_options("assoc_memory", memory, locations, path)
        check_mixer_fits(MixerConfig("assoc_memory", options), model.d_model, locations, path)
    return config


def _from_dict(spec: dict) -> tuple[dict, Locations, str]:
    """A spec given as a Python dict; its `extends` still resolves to a shipped name or a path."""
    data, locations = read_yaml(yaml.safe_dump(spec, sort_keys=False), "<dict>")
    parent = data.pop("extends", None)
    if parent is not None:
        base, base_locations = load_raw(locate(parent))
        base.pop("name", None)
        data, locations = deep_merge(base, data, base_locations, locations)
    return data, locations, "<dict>"
