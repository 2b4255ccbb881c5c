"""`Spec`: a loaded, validated spec file, and `load_spec` to get one from a name, path or dict."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import yaml

from .config import ARMTConfig, ModelConfig
from .resolve import (
    TOP_KEYS, apply_set, check_keys, deep_merge, load_raw, locate, resolve_armt, resolve_base, resolve_model,
)
from .yaml_source import Locations, SpecError, fail, read_yaml
from ..training.config import TrainingConfig, read_training


@dataclass(frozen=True)
class Spec:
    """A validated spec: the model config plus its name and where it came from.

    An ARMT spec adds `armt`, around either `model` (a stack built from scratch) or `hf_checkpoint`
    (a Hugging Face save_pretrained directory, the `base:` section; `model` is then None).
    """

    model: ModelConfig | None
    name: str | None = None
    description: str | None = None
    source: str | None = None
    training: TrainingConfig | None = None  # the `training:` section, validated
    armt: ARMTConfig | None = None
    hf_checkpoint: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The resolved spec (no `extends`, every option explicit): loading it gives this Spec's model."""
        data: dict[str, Any] = {}
        if self.name:
            data["name"] = self.name
        if self.description:
            data["description"] = self.description
        if self.hf_checkpoint is not None:
            data["base"] = {"hf_checkpoint": self.hf_checkpoint}
        if self.model is not None:
            data["model"] = self.model.to_dict()
        if self.armt is not None:
            data["armt"] = self.armt.to_dict()
        if self.training is not None:
            data["training"] = self.training.to_dict()
        return data

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_yaml())


def load_spec(spec: str | Path | dict | Spec, overrides: Iterable[str] = ()) -> Spec:
    """A Spec from a shipped name ("swa-full"), a YAML path, a dict or a Spec.

    overrides: `dotted.key=value` strings, as `--set` on the command line, applied last.
    Raises SpecError whose message names the file, the line and the key.
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
    for assignment in overrides:
        apply_set(data, locations, assignment)
    check_keys(data, TOP_KEYS, locations, ())
    hf_checkpoint = resolve_base(data["base"], locations) if "base" in data else None
    if hf_checkpoint is not None and ("model" in data or "armt" not in data):
        raise fail(locations, ("base",), "a 'base' checkpoint is wrapped by an 'armt' section and replaces 'model'")
    if "model" not in data and hf_checkpoint is None:
        raise fail(locations, (), "missing required section 'model'")
    model = resolve_model(data["model"], locations) if "model" in data else None
    return Spec(
        model=model,
        training=read_training(data.get("training"), locations, model.vocab_size if model else None),
        armt=resolve_armt(data["armt"], locations, model) if "armt" in data else None,
        hf_checkpoint=hf_checkpoint,
        name=data.get("name") or (Path(source).stem if source and source.endswith((".yaml", ".yml")) else None),
        description=data.get("description"),
        source=source,
    )


def _from_dict(spec: dict) -> tuple[dict, Locations, str]:
    """A spec given as a Python dict; its `extends` still resolves to a shipped name or a path."""
    data, locations = read_yaml(yaml.safe_dump(spec, sort_keys=False), "<dict>")
    parent = data.pop("extends", None)
    if parent is not None:
        base, base_locations = load_raw(locate(parent))
        base.pop("name", None)
        data, locations = deep_merge(base, data, base_locations, locations)
    return data, locations, "<dict>"
