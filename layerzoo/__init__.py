"""layerzoo: pluggable token mixers behind one contract, composed by YAML specs into hybrid models.

Its layers import only those below them, in the order tests/test_layers.py declares (LAYERS) and
docs/layout.md shows.

Importing `layerzoo` itself is light (no torch): the names below load with their layers on first
use, and with them the built-in mixers and the `training:` spec section register. The registries
load them too, on their first lookup, so a module reached directly (`from layerzoo.specs import
load_spec`) finds them as well. So `layerzoo --help` answers without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from . import registry

__version__ = "0.1.0"

# Each public name and the layer it comes from.
_NAMES = {
    "LayerzooError": "errors", "OptionError": "errors", "SpecError": "errors", "option": "options",
    "get_mixer": "registry", "list_mixers": "registry", "list_targets": "registry", "register_mixer": "registry",
    "unregister_mixer": "registry",
    "Mixer": "mixers", "MixerOptions": "mixers", "set_window": "mixers",
    "Spec": "specs", "load_spec": "specs", "shipped_specs": "specs",
    "ARMT": "assemblies", "CausalLM": "assemblies", "build": "assemblies",
}


# The layers whose import registers built-ins: the mixers, and `training` (its spec section).
_BUILTINS = ("mixers", "specs", "assemblies", "training")
_loading = False


def load() -> None:
    """Import the layers that register built-ins (a no-op while they are importing)."""
    global _loading
    if _loading:
        return
    _loading = True
    try:
        for layer in _BUILTINS:
            importlib.import_module(f".{layer}", __name__)
    finally:
        _loading = False


registry.load_builtins_with(load)


def __getattr__(name: str) -> Any:
    """A public name, or a layer (`layerzoo.training`), loaded on first use. Dunder probes (pickle,
    inspect) and lookups while the layers import (`from layerzoo import x` asks first) load nothing."""
    if name.startswith("__") or _loading:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    load()
    if name in _NAMES:
        value = getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
        globals()[name] = value
        return value
    if name in globals():  # a layer that load() imported
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})


__all__ = [
    "ARMT", "CausalLM", "LayerzooError", "Mixer", "MixerOptions", "OptionError", "Spec", "SpecError", "__version__",
    "build", "get_mixer", "list_mixers", "list_targets", "load_spec", "option", "register_mixer", "set_window",
    "shipped_specs", "unregister_mixer",
]
