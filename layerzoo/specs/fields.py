"""Spec sections as dataclasses whose fields carry their defaults, types and bounds.

    @dataclass(frozen=True)
    class OptimizerConfig(Section):
        lr: float = option(1e-3, min=0.0)
        warmup_steps: int = option(0, min=0)

A Section checks itself when it is made, from a spec file or from Python: every value against its
field's annotation (int, float, bool, str, X | None, Literal[...], tuple[X, ...], dict, or a nested
Section, which may be given as a mapping), then against the field's bounds, then the section's own
`validate()` for combinations of fields. A failure is an OptionError whose key is the dotted path of
the value inside the section; `read_section` turns it into a SpecError naming the file and line.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any

from ..errors import OptionError, SpecError, did_you_mean
from .options import check_type, type_name
from .yaml_source import KeyPath, Locations, fail

BOUNDS = ("min", "max", "above")


def option(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, min: float | None = None,
           max: float | None = None, above: float | None = None) -> Any:
    """A section field: its default (or a `factory` for mutable ones; neither: required) and its
    bounds, inclusive `min` and `max` or exclusive `above`. Bounds apply to each element of a tuple."""
    bounds = {name: value for name, value in zip(BOUNDS, (min, max, above)) if value is not None}
    return dataclasses.field(default=default, default_factory=factory, metadata=bounds)


@dataclasses.dataclass(frozen=True)
class Section:
    """Base of the spec's section dataclasses: checks (and converts) its fields when made."""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            value = convert(getattr(self, item.name), field_types(type(self))[item.name], item.name)
            check_bounds(value, item.metadata, item.name)
            object.__setattr__(self, item.name, value)
        self.validate()

    def validate(self) -> None:
        """Raise OptionError(key, message) for combinations of fields that cannot go together."""

    def to_dict(self) -> dict[str, Any]:
        """The mapping that reads back to this section (tuples as lists: YAML has none)."""
        return {item.name: plain(getattr(self, item.name)) for item in dataclasses.fields(self)}


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def plain(value: Any) -> Any:
    """A section value as YAML-ready data: nested sections as mappings, tuples as lists."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    return value


def members(annotation: Any) -> tuple:
    """The types a value of `annotation` may have: X | Y -> (X, Y); X -> (X,)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    return typing.get_args(annotation) if union else (annotation,)


def is_section(choice: Any) -> bool:
    return isinstance(choice, type) and issubclass(choice, Section)


def is_mapping(choice: Any) -> bool:
    return typing.get_origin(choice) is dict or choice is dict


def convert(value: Any, annotation: Any, key: str) -> Any:
    """`value` checked against `annotation` and converted (a list to a tuple, an int to a float,
    a mapping to a nested Section); OptionError(key) when it does not fit."""
    choices = members(annotation)
    sections = [choice for choice in choices if is_section(choice)]
    if isinstance(value, dict) and sections:
        return make_section(sections[0], value, key)
    if any(isinstance(value, choice) for choice in sections):
        return value
    tuples = [choice for choice in choices if typing.get_origin(choice) is tuple]
    if isinstance(value, (list, tuple)) and tuples:
        element = typing.get_args(tuples[0])[0]
        return tuple(convert(item, element, f"{key}.{index}") for index, item in enumerate(value))
    containers = [choice for choice in choices if is_mapping(choice)]
    if isinstance(value, dict) and containers:
        return value  # its owner checks keys and values (mixer configs, layer overrides)
    plain_choices = [choice for choice in choices if choice not in sections and choice not in tuples + containers]
    for choice in plain_choices:
        ok, converted = check_type(value, choice)
        if ok:
            if isinstance(converted, float) and not math.isfinite(converted):
                raise OptionError(key, f"must be a finite number, got {value!r}")
            return converted
    raise OptionError(key, f"expected {describe(annotation)}, got {value!r}")


def describe(annotation: Any) -> str:
    """'int or null', 'a list', 'a mapping': the annotation in a spec author's words."""
    words = []
    for choice in members(annotation):
        if typing.get_origin(choice) is tuple:
            words.append("a list")
        elif is_mapping(choice) or is_section(choice):
            words.append("a mapping")
        else:
            words.append(type_name(choice).replace("NoneType", "null").replace("None", "null"))
    return " or ".join(dict.fromkeys(words))


def check_bounds(value: Any, bounds: typing.Mapping[str, float], key: str) -> None:
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            check_bounds(item, bounds, f"{key}.{index}")
        return
    if not bounds or isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    low, high, above = (bounds.get(name) for name in BOUNDS)
    if (low is not None and value < low) or (high is not None and value > high) or (above is not None and value <= above):
        if above is not None:
            wanted = f"> {above}"
        elif high is None:
            wanted = f">= {low}"
        else:
            wanted = f"between {low} and {high}"
        raise OptionError(key, f"must be {wanted}, got {value}")


def make_section(cls: type, mapping: dict, key: str = "") -> Any:
    """cls(**mapping), with unknown and missing keys reported as OptionErrors under `key`."""
    prefix = f"{key}." if key else ""
    known = [item.name for item in dataclasses.fields(cls)]
    for name in mapping:
        if name not in known:
            raise OptionError(f"{prefix}{name}", f"unknown key{did_you_mean(str(name), known)} (known: {', '.join(known)})")
    for item in dataclasses.fields(cls):
        required = item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING
        if required and item.name not in mapping:
            raise OptionError(key, f"missing required key {item.name!r}")
    try:
        return cls(**mapping)
    except OptionError as error:
        raise OptionError(f"{prefix}{error.key}" if error.key else key, error.message) from None


def read_section(cls: type, mapping: Any, locations: Locations, path: KeyPath) -> Any:
    """The section `cls` from a spec's mapping at `path`; a SpecError names the file, line and key."""
    if not isinstance(mapping, dict):
        raise fail(locations, path, f"expected a mapping, got {mapping!r}")
    try:
        return make_section(cls, mapping)
    except OptionError as error:
        raise located(error, locations, path) from None


def located(error: OptionError, locations: Locations, path: KeyPath) -> SpecError:
    """A SpecError at the key an OptionError names, below `path` (its nearest located ancestor)."""
    parts = tuple(int(part) if part.lstrip("-").isdigit() else part for part in error.key.split(".")) if error.key else ()
    return fail(locations, path + parts, error.message)
