"""Sections of a spec that the layers above specs own, such as `training:`.

The owning layer registers a reader for its key when it is imported (the registry's built-ins
loader imports them all), so a spec is validated whole when it is read while specs import nothing
above them.
A reader takes (the raw mapping, its Locations, the spec's resolved ModelConfig or None for a
Hugging Face base) and returns a value with `to_dict()`; it raises SpecErrors located with
`fail` or `read_section`.
"""

from __future__ import annotations

from typing import Any, Callable

from ..registry import ensure_builtins
from .config import ModelConfig
from .yaml_source import Locations

SectionReader = Callable[[Any, Locations, "ModelConfig | None"], Any]

_READERS: dict[str, SectionReader] = {}


def register_section(key: str, reader: SectionReader) -> None:
    """Let `reader` validate the top-level `key` of every spec read from now on."""
    _READERS[key] = reader


def section_readers() -> dict[str, SectionReader]:
    ensure_builtins()  # the layers above register their sections when they load
    return dict(_READERS)
