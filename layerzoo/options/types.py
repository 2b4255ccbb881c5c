"""Checking a value against a mixer option's annotation (int, float, bool, str, X | None, Literal)."""

from __future__ import annotations

import types
import typing
from typing import Any


def check_type(value: Any, annotation: Any) -> tuple[bool, Any]:
    """(ok, converted value). An int, or a string such as "1e-6", is accepted for a float."""
    if annotation is Any:
        return True, value
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(annotation):
            ok, converted = check_type(value, option)
            if ok:
                return True, converted
        return False, value
    if origin is typing.Literal:
        return value in typing.get_args(annotation), value
    if annotation is type(None):
        return value is None, value
    if annotation is bool:
        return isinstance(value, bool), value
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool), value
    if annotation is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return True, float(value)
        if not isinstance(value, str):
            return False, value
        try:  # YAML 1.1 reads `1e-6` (no dot) as a string; accept what reads as a number
            return True, float(value)
        except ValueError:
            return False, value
    if isinstance(annotation, type):
        return isinstance(value, annotation), value
    return True, value


def type_name(annotation: Any) -> str:
    """'int or None', 'float', 'one of auto, chunkwise'."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(option) for option in typing.get_args(annotation))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(str, typing.get_args(annotation)))
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation))
