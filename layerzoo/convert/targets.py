"""The options of the mixer a teacher's attention layer becomes: the ones its class derives from
the teacher's shape (`options_from_attention`, fixed: the weights would not fit otherwise), the
teacher's values of its `defaults_from_attention` unless the pattern sets them, the rest at the
mixer's defaults.
"""

from __future__ import annotations

from typing import Any

from ..errors import LayerzooError, OptionError
from ..mixers.from_attention import TeacherAttention
from ..registry import get_mixer, read_options
from ..specs import LayerConfig
from .errors import ConvertError


def student_options(teacher: LayerConfig, kind: str, given: dict[str, Any], d_model: int, where: str) -> dict[str, Any]:
    """Every declared option of the `kind` mixer that replaces the teacher layer: the derived ones,
    the pattern's, the rest at their defaults; ConvertError naming the option that cannot be."""
    cls = get_mixer(kind).cls
    try:
        fixed = cls.options_from_attention(TeacherAttention.of(teacher.options, d_model))
    except OptionError as error:
        raise ConvertError(f"{where}: {error.message}") from None
    defaults = {key: teacher.options[key] for key in getattr(cls, "defaults_from_attention", ()) if key in teacher.options}
    for key, value in given.items():
        if key in fixed and value != fixed[key]:
            raise ConvertError(f"{where}: {kind}.{key} is {value!r}, but initialising from the teacher's attention "
                               f"needs {fixed[key]!r}; leave it unset")
    return complete(kind, defaults | given | fixed, d_model, f"{where}: {kind}.")


def complete(kind: str, options: dict[str, Any], d_model: int, prefix: str) -> dict[str, Any]:
    """Every declared option of a `kind` mixer, the given ones checked (types, bounds, the
    combinations at d_model); ConvertError(prefix + the option's error)."""
    entry = get_mixer(kind)
    try:
        made = read_options(entry.cls, options)
        made.check(d_model)
    except LayerzooError as error:
        raise ConvertError(f"{prefix}{error}") from None
    return {key: getattr(made, key) for key in entry.options}
