"""The mixer registry: token mixers registered by name, looked up by specs and the CLI.

It holds entries and imports no mixer: the package registers its built-in mixers when
`layerzoo` is imported, as a user's own module registers theirs.

A user mixer declares its options once, as the fields of its `Options` dataclass, and joins the
registry with the decorator; from then on specs can place it, `layerzoo mixers NAME` lists its
options and the `layerzoo.testing` conformance checks run on it::

    @layerzoo.register_mixer("my_mixer", test_options={"n_heads": 2})
    class MyMixer(layerzoo.Mixer):
        @dataclass(frozen=True)
        class Options(layerzoo.MixerOptions):
            n_heads: int = layerzoo.option(4, min=1, help="heads")

        def __init__(self, d_model: int, **options):
            super().__init__(d_model, **options)   # checks them; self.options.n_heads
            ...
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import OptionError, UnknownNameError, did_you_mean, unknown_name_message
from .options import OptionInfo, declared, make_section


@dataclass(frozen=True)
class MixerEntry:
    """A registered mixer class, its options, and small options for conformance tests."""

    name: str
    cls: type
    test_options: dict[str, Any] = field(default_factory=dict)

    @functools.cached_property
    def options(self) -> dict[str, OptionInfo]:
        """The declared options (the fields of `cls.Options`), in declaration order."""
        return declared(self.cls.Options)

    def check(self, d_model: int, **options: Any) -> None:
        """Raise OptionError unless `options` (the rest at their defaults) can build the mixer at
        width d_model: what a spec checks for a mixer config, without building it."""
        read_options(self.cls, options).check(d_model)

    @property
    def converts_from_attention(self) -> bool:
        """Whether `layerzoo convert` can make this mixer from an attention layer: its class
        defines options_from_attention and init_from_attention (layerzoo/mixers/from_attention.py)."""
        return all(callable(getattr(self.cls, name, None)) for name in FROM_ATTENTION)

    @property
    def summary(self) -> str:
        """First line of the class docstring."""
        return (inspect.getdoc(self.cls) or "").splitlines()[0] if self.cls.__doc__ else ""


def read_options(cls: type, options: dict[str, Any]) -> Any:
    """`cls.Options` made of `options`, each checked against its declaration: OptionError(key) for
    an unknown option (naming the closest), a missing required one or a bad value."""
    known = declared(cls.Options)
    kind = repr(cls.registry_name) if getattr(cls, "registry_name", "") else cls.__qualname__
    for key in options:
        if key not in known:
            raise OptionError(key, f"unknown option of mixer {kind}{did_you_mean(str(key), known)} (options: {', '.join(known)})")
    for key, info in known.items():
        if info.required and key not in options:
            raise OptionError("", f"mixer {kind} needs option {key!r}")
    return make_section(cls.Options, options)


# What a mixer defines to be a target of `layerzoo convert`: both, or neither.
FROM_ATTENTION = ("options_from_attention", "init_from_attention")


def check_declaration(cls: type, test_options: dict[str, Any]) -> None:
    """A ValueError, at registration, for a mixer whose options are not declared as its Options'
    fields: a constructor with options of its own, an Options class that is not a dataclass, or
    test options it does not declare; and for one that defines one of FROM_ATTENTION alone."""
    options = getattr(cls, "Options", None)
    if options is None or not dataclasses.is_dataclass(options) or (
            inspect.get_annotations(options) and "__dataclass_fields__" not in vars(options)):
        raise ValueError(f"{cls.__qualname__}.Options must be a @dataclass(frozen=True) subclass of layerzoo.MixerOptions")
    parameters = list(inspect.signature(cls.__init__).parameters.values())[2:]  # after self, d_model
    named = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if named:
        raise ValueError(f"{cls.__qualname__}.__init__ takes {', '.join(named)}: declare options as fields of "
                         f"{cls.__qualname__}.Options and take them as **options")
    unknown = [name for name in test_options if name not in declared(options)]
    if unknown:
        raise ValueError(f"test_options of {cls.__qualname__} name undeclared options: {', '.join(unknown)}")
    defined = [name for name in FROM_ATTENTION if callable(getattr(cls, name, None))]
    if len(defined) == 1:
        missing = next(name for name in FROM_ATTENTION if name not in defined)
        raise ValueError(f"{cls.__qualname__} defines {defined[0]} but not {missing}: a target of layerzoo convert "
                         "defines both")


_REGISTRY: dict[str, MixerEntry] = {}
# What imports the built-in mixers (and the other built-ins registries hold), run before the first
# lookup: the package root sets it, so that the registry holds them however it is reached while
# importing layerzoo stays light.
_load_builtins: Callable[[], None] | None = None


def load_builtins_with(load: Callable[[], None]) -> None:
    """Let `load()` register the built-ins before the first lookup (see ensure_builtins)."""
    global _load_builtins
    _load_builtins = load


def ensure_builtins() -> None:
    """Register the built-ins, once, before a lookup; a no-op while they are registering."""
    global _load_builtins
    load, _load_builtins = _load_builtins, None
    if load is not None:
        load()


def register_mixer(name: str, *, test_options: dict[str, Any] | None = None) -> Callable[[type], type]:
    """Class decorator registering a mixer under `name`.

    `test_options` are small options (few heads, short windows) the conformance checks use.
    Registering a taken name with a different class, or a class whose options are not declared in
    its Options dataclass, is an error.

    Args:
        name: the name specs and the CLI place the mixer by (`type: name` in a spec's pattern).
        test_options: options the conformance checks build the mixer with (each declared in
            its Options); None: the defaults.

    Returns:
        The decorator: it registers the class, sets its `registry_name` and returns it unchanged.

    Raises:
        ValueError: (when the decorator runs) `name` is registered to another class; the class has
            no `@dataclass(frozen=True)` Options, its constructor takes options of its own after
            d_model, or test_options names an option it does not declare.
    """

    def decorate(cls: type) -> type:
        if cls.__module__.partition(".")[0] != __name__.partition(".")[0]:
            ensure_builtins()  # a user's mixer registers after the built-ins: taking one's name fails here
        existing = _REGISTRY.get(name)
        if existing is not None and existing.cls is not cls:
            raise ValueError(f"mixer name {name!r} is already registered to {existing.cls.__qualname__}")
        check_declaration(cls, test_options or {})
        _REGISTRY[name] = MixerEntry(name=name, cls=cls, test_options=dict(test_options or {}))
        cls.registry_name = name
        return cls

    return decorate


def unregister_mixer(name: str) -> None:
    """Remove a registered mixer (for tests and interactive work).

    Args:
        name: the registered name; one that is not registered is no error.
    """
    _REGISTRY.pop(name, None)


def get_mixer(name: str) -> MixerEntry:
    """The registry entry for `name`; an unknown name fails with the known names and the closest.

    Args:
        name: a registered mixer name ("swa", "mlstm", ...).

    Returns:
        Its MixerEntry: `cls`, the mixer class; `options`, its declared options (name ->
            OptionInfo, in declaration order); `test_options`; `check(d_model, **options)`.

    Raises:
        UnknownNameError: `name` is not registered (a LayerzooError and a KeyError).
    """
    ensure_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UnknownNameError(unknown_name_message("mixer", name, _REGISTRY)) from None


def list_mixers() -> list[str]:
    """Names of all registered mixers, sorted.

    Returns:
        The names, the built-ins and any the user registered, sorted.
    """
    ensure_builtins()
    return sorted(_REGISTRY)


def list_targets() -> list[str]:
    """Names of the registered mixers `layerzoo convert` can make from an attention layer, sorted.

    Returns:
        The names whose class defines options_from_attention and init_from_attention, the
            built-ins and any the user registered, sorted.
    """
    ensure_builtins()
    return sorted(name for name, entry in _REGISTRY.items() if entry.converts_from_attention)
