"""Options declared once: dataclasses whose fields carry their type, default, bounds and a one-line
description, for mixers and spec sections alike.

    @dataclass(frozen=True)
    class OptimizerConfig(Section):
        lr: float = option(1e-3, min=0.0, help="peak learning rate")
        warmup_steps: int = option(0, min=0, help="steps of linear warmup")

A Section checks itself when it is made, from a spec file or from Python: every value against its
field's annotation (int, float, bool, str, X | None, Literal[...], tuple[X, ...], dict, or a nested
Section, which may be given as a mapping), then against the field's bounds, then the section's own
`validate()` for combinations of fields. A failure is an OptionError whose key is the dotted path of
the value inside the section; `read_section` turns it into a SpecError naming the file and line.
`declared(cls)` lists the options as the CLI and the docs show them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import types
import typing
from typing import Any

from ..errors import OptionError, did_you_mean
from .types import check_type, type_name

BOUNDS = ("min", "max", "above")


def option(default: Any = dataclasses.MISSING, *, factory: Any = dataclasses.MISSING, min: float | None = None,
           max: float | None = None, above: float | None = None, choices: typing.Iterable[str] | None = None,
           help: str = "") -> Any:
    """A section field: its default (or a `factory` for mutable ones; neither: required), its
    bounds, inclusive `min` and `max` or exclusive `above` (they apply to each element of a
    tuple), the `choices` a string may take, and `help`, the one line the CLI and the docs show.

    Args:
        default: the value when none is given; left out (and no factory): the option is required.
        factory: a callable making the default, for mutable values (a list, a dict).
        min: the smallest value allowed, inclusive.
        max: the largest value allowed, inclusive.
        above: a value the option must exceed (exclusive lower bound).
        choices: the strings the option may take.
        help: the one-line description the CLI and the docs show.

    Returns:
        A `dataclasses.field` carrying the bounds, choices and help in its metadata, for a field of
            a Section or MixerOptions dataclass; the values are checked when the section is made (an
            OptionError naming the field).
    """
    metadata: dict[str, Any] = {name: value for name, value in zip(BOUNDS, (min, max, above)) if value is not None}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    if help:
        metadata["help"] = help
    return dataclasses.field(default=default, default_factory=factory, metadata=metadata)


@dataclasses.dataclass(frozen=True)
class Section:
    """Base of the option dataclasses (spec sections, mixers' options): checks (and converts) its
    fields when made."""

    def __post_init__(self) -> None:
        for item in dataclasses.fields(self):
            object.__setattr__(self, item.name, checked(item, field_types(type(self))[item.name], getattr(self, item.name)))
        self.validate()

    def validate(self) -> None:
        """Raise OptionError(key, message) for combinations of fields that cannot go together."""

    def to_dict(self) -> dict[str, Any]:
        """The mapping that reads back to this section (tuples as lists: YAML has none)."""
        return {item.name: plain(getattr(self, item.name)) for item in dataclasses.fields(self)}


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def is_required(item: dataclasses.Field) -> bool:
    """Whether the field has neither a default nor a factory."""
    return item.default is dataclasses.MISSING and item.default_factory is dataclasses.MISSING


def checked(item: dataclasses.Field, annotation: Any, value: Any) -> Any:
    """`value` for the field `item`, checked against its annotation, bounds and choices and converted."""
    value = convert(value, annotation, item.name)
    check_bounds(value, item.metadata, item.name)
    check_choices(value, item.metadata.get("choices"), item.name)
    return value


def check_value(cls: type, name: str, value: Any) -> Any:
    """`value` checked as the option `name` of `cls` would be, and converted: for values set after
    construction (an SWA layer's window at run time)."""
    item = next(item for item in dataclasses.fields(cls) if item.name == name)
    return checked(item, field_types(cls)[name], value)


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
        if element is int and all(type(item) is int for item in value):  # a tokenizer's ids: tens of thousands
            return tuple(value)
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


def check_bounds(value: Any, bounds: typing.Mapping[str, Any], key: str) -> None:
    if all(bounds.get(name) is None for name in BOUNDS):
        return
    if isinstance(value, tuple):
        for index, item in enumerate(value):
            check_bounds(item, bounds, f"{key}.{index}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    low, high, above = (bounds.get(name) for name in BOUNDS)
    if (low is not None and value < low) or (high is not None and value > high) or (above is not None and value <= above):
        raise OptionError(key, f"must be {bounds_text(bounds)}, got {value}")


def bounds_text(bounds: typing.Mapping[str, Any]) -> str:
    """'>= 1', '> 0.0', 'between 0.0 and 1.0', '> 0.0 and <= 64.0', or '' without bounds."""
    low, high, above = (bounds.get(name) for name in BOUNDS)
    if low is not None and high is not None:
        return f"between {low} and {high}"
    parts = [f"> {above}" if above is not None else "", f">= {low}" if low is not None else "",
             f"<= {high}" if high is not None else ""]
    return " and ".join(part for part in parts if part)


def check_choices(value: Any, choices: tuple[str, ...] | None, key: str) -> None:
    if choices is not None and value not in choices:
        raise OptionError(key, f"unknown value {value!r}{did_you_mean(str(value), choices)} (one of: {', '.join(choices)})")


def make_section(cls: type, mapping: dict, key: str = "") -> Any:
    """cls(**mapping), with unknown and missing keys reported as OptionErrors under `key`."""
    prefix = f"{key}." if key else ""
    known = [item.name for item in dataclasses.fields(cls)]
    for name in mapping:
        if name not in known:
            raise OptionError(f"{prefix}{name}", f"unknown key{did_you_mean(str(name), known)} (known: {', '.join(known)})")
    for item in dataclasses.fields(cls):
        if is_required(item) and item.name not in mapping:
            raise OptionError(key, f"missing required key {item.name!r}")
    try:
        return cls(**mapping)
    except OptionError as error:
        raise OptionError(f"{prefix}{error.key}" if error.key else key, error.message) from None


@dataclasses.dataclass(frozen=True)
class OptionInfo:
    """One declared option as the CLI, spec errors and the docs show it. default is None for a
    required option; help is its one-line description."""

    name: str
    annotation: Any
    default: Any
    required: bool
    help: str
    bounds: str
    choices: tuple[str, ...] | None

    @property
    def type_text(self) -> str:
        """'int or null': the type in a spec author's words."""
        return describe(self.annotation)


def declared(cls: type) -> dict[str, OptionInfo]:
    """The options of the dataclass `cls` (a Section), in declaration order."""
    infos = {}
    for item in dataclasses.fields(cls):
        required = is_required(item)
        if required:
            default = None
        else:
            default = item.default if item.default is not dataclasses.MISSING else item.default_factory()
        infos[item.name] = OptionInfo(item.name, field_types(cls)[item.name], default, required,
                                      item.metadata.get("help", ""), bounds_text(item.metadata), item.metadata.get("choices"))
    return infos
