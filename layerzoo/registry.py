"""The mixer registry: token mixers registered by name, looked up by specs and the CLI.

It holds entries and imports no mixer: the package registers its built-in mixers when
`layerzoo` is imported, as a user's own module registers theirs.

A user mixer joins the registry with the decorator, and from then on specs can place it and
`layerzoo.testing` conformance checks run on it::

    @layerzoo.register_mixer("my_mixer", test_options={"n_heads": 2})
    class MyMixer(layerzoo.Mixer):
        ...
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, get_type_hints

from .errors import UnknownNameError, unknown_name_message


@dataclass(frozen=True)
class OptionInfo:
    """One constructor option of a mixer: name, default and annotated type."""

    name: str
    default: Any
    annotation: Any
    required: bool


@dataclass(frozen=True)
class MixerEntry:
    """A registered mixer class, its options, and small options for conformance tests."""

    name: str
    cls: type
    test_options: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def options(self) -> dict[str, OptionInfo]:
        """Keyword options of `cls.__init__` after `d_model`, in declaration order."""
        signature = inspect.signature(self.cls.__init__)
        hints = get_type_hints(self.cls.__init__)
        options = {}
        for parameter in list(signature.parameters.values())[2:]:  # skip self, d_model
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                continue
            required = parameter.default is inspect.Parameter.empty
            options[parameter.name] = OptionInfo(
                name=parameter.name,
                default=None if required else parameter.default,
                annotation=hints.get(parameter.name, Any),
                required=required,
            )
        return options

    def check(self, d_model: int, **options: Any) -> None:
        """The mixer's `check_options` on `options` completed with the constructor's defaults: what
        a spec checks for a mixer config (value checks only; types are the annotations')."""
        missing = [name for name, info in self.options.items() if info.required and name not in options]
        if missing:
            raise TypeError(f"mixer {self.name!r} needs option {missing[0]!r}")
        defaults = {name: info.default for name, info in self.options.items() if not info.required}
        self.cls.check_options(d_model, **{**defaults, **options})

    @property
    def summary(self) -> str:
        """First line of the class docstring."""
        return (inspect.getdoc(self.cls) or "").splitlines()[0] if self.cls.__doc__ else ""


_REGISTRY: dict[str, MixerEntry] = {}


def register_mixer(name: str, *, test_options: dict[str, Any] | None = None) -> Callable[[type], type]:
    """Class decorator registering a mixer under `name`.

    `test_options` are small options (few heads, short windows) the conformance checks use.
    Registering a taken name with a different class is an error.
    """

    def decorate(cls: type) -> type:
        existing = _REGISTRY.get(name)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"mixer name {name!r} is already registered to {existing.cls.__qualname__}")
        _REGISTRY[name] = MixerEntry(name=name, cls=cls, test_options=dict(test_options or {}))
        cls.registry_name = name
        return cls

    return decorate


def unregister_mixer(name: str) -> None:
    """Remove a registered mixer (for tests and interactive work)."""
    _REGISTRY.pop(name, None)


def get_mixer(name: str) -> MixerEntry:
    """The registry entry for `name`; an unknown name fails with the known names and the closest."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(unknown_name_message("mixer", name, _REGISTRY)) from None


def list_mixers() -> list[str]:
    """Names of all registered mixers, sorted."""
    return sorted(_REGISTRY)
