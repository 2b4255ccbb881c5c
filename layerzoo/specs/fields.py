"""A spec's sections read from its YAML: a Section made from a mapping, its errors located at the
file, line and key that set the value."""

from __future__ import annotations

from typing import Any

from ..errors import OptionError, SpecError
from ..options import make_section
from .yaml_source import KeyPath, Locations, fail


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
