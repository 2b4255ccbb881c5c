"""The window of a model's sliding-window attention layers, changed at run time.

Its one source of truth is each layer's `window` option (`mixer.options.window`). `set_window`
checks the value once and puts it there; then every module above the layers whose config
describes its mixers re-reads them through its `refresh_config()` (a CausalLM, then a
LayerzooForCausalLM holding it), so that a model saved or exported afterwards states the window
it runs at.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Iterator

from torch import nn

from ..options import check_value
from .attention import SlidingWindowAttention, SlidingWindowOptions, sliding_window_layers


def set_window(model: nn.Module, window: int) -> int:
    """Set the window of every sliding-window attention layer in `model`; returns how many.

    The SWAX recipe samples a window per batch and evaluates at a test window other than the
    training one; both are this call, no rebuild. The layers' options and the configs of the
    modules holding them (a CausalLM's `config`, a LayerzooForCausalLM's) say the new window.

    Args:
        model: any module; every SlidingWindowAttention inside it (the module itself included) is set.
        window: keys each query attends to, itself included: an int >= 1.

    Returns:
        How many layers were set (0 for a model without SWA layers).

    Raises:
        OptionError: `window` is not an int >= 1 (checked as the `window` option is).
    """
    window = check_value(SlidingWindowOptions, "window", window)
    modules = list(model.modules())
    layers = [module for module in modules if isinstance(module, SlidingWindowAttention)]
    for layer in layers:
        if layer.options.window != window:
            layer.options = with_window(layer.options, window)
    refresh_configs(modules)
    return len(layers)


@contextlib.contextmanager
def at_window(model: nn.Module, window: int | None) -> Iterator[None]:
    """Inside the block every SWA layer of `model` runs at `window` (None: unchanged); on the way
    out each layer's options, and the configs above them, are what they were."""
    if window is None:
        yield
        return
    layers = sliding_window_layers(model)
    saved = [layer.options for layer in layers]
    set_window(model, window)
    try:
        yield
    finally:
        for layer, options in zip(layers, saved):
            layer.options = options
        refresh_configs(list(model.modules()))


def with_window(options: SlidingWindowOptions, window: int) -> SlidingWindowOptions:
    """`options` with `window`, which set_window has checked: the other fields, checked when the
    layer was built, are not checked again on every training step."""
    changed = copy.copy(options)
    object.__setattr__(changed, "window", window)
    return changed


def refresh_configs(modules: list[nn.Module]) -> None:
    """Each module's `refresh_config()`, where its class has one, children before parents (as
    `modules()` lists them, reversed): a config is re-read after those below it."""
    for module in reversed(modules):
        refresh = getattr(type(module), "refresh_config", None)
        if refresh is not None:
            refresh(module)
