"""Initialising a model built on the meta device: the weights a normal build would have, bit for bit.

A module's constructor builds its submodules (each initialising itself) and then calls its own
`reset_parameters()`, which sets its own tensors and may overwrite its submodules' defaults (the
mLSTM's gates, the causal LM's embedding). Running every module's `reset_parameters()` children
first, in registration order, therefore draws the same random numbers in the same order as
construction did: from the same RNG state, the same weights.

    with torch.device("meta"):
        model = CausalLM(config)       # nothing allocated, no random numbers drawn
    init_weights(model, "cpu")         # allocated and initialised module by module
"""

from __future__ import annotations

from typing import Callable, Iterator

import torch
from torch import nn


def init_weights(model: nn.Module, device: torch.device | str = "cpu") -> nn.Module:
    """Allocate `model`'s meta tensors on `device` and (re-)initialise every module as its
    construction did, in construction order; returns the model.

    Also re-runs the initialisation of a model moved with `to_empty`. Draw on the CPU to get what
    a CPU build followed by `.to(device)` has: other devices' generators give other numbers.
    """
    for module in construction_order(model):
        init_module(module, device)
    return model


def construction_order(model: nn.Module) -> Iterator[nn.Module]:
    """Every module once, children before parents, siblings in registration order."""
    seen = set()

    def visit(module: nn.Module) -> Iterator[nn.Module]:
        seen.add(module)
        for child in module.children():
            if child not in seen:
                yield from visit(child)
        yield module

    return visit(model)


def saved_tensors(module: nn.Module) -> list[torch.Tensor]:
    """The module's own parameters and persistent buffers: what a checkpoint can hold."""
    skip = module._non_persistent_buffers_set
    return [*module.parameters(recurse=False), *(b for name, b in module.named_buffers(recurse=False) if name not in skip)]


def init_module(module: nn.Module, device: torch.device | str, keep: Callable[[torch.Tensor], bool] | None = None) -> None:
    """Allocate the module's own meta parameters and buffers on `device` (in place: tied
    parameters stay tied) and run its own `reset_parameters()`.

    keep: tensors to leave as they are (weights loaded from a checkpoint). reset_parameters may set
    its direct submodules' tensors too (the mLSTM its gate projection's), so those are kept as well;
    a module all of whose own tensors and direct submodules' saved ones are kept is not reset at all
    (a submodule's non-persistent buffers are its own init's, done before its parent's).
    Raises TypeError for a module that holds tensors but has no reset_parameters(): nothing
    could give them their values.
    """
    own = [*module.parameters(recurse=False), *module.buffers(recurse=False)]
    kept, saved = [], []
    if keep is not None:
        reach = own + [t for child in module.children() for t in saved_tensors(child)]
        kept = [t for t in reach if keep(t)]
        if len(kept) == len(reach):
            return
        saved = [t.detach().clone() for t in kept]
    for tensor in own:
        if tensor.is_meta:
            empty = torch.empty_like(tensor, device=device)
            if isinstance(tensor, nn.Parameter):
                empty = nn.Parameter(empty, requires_grad=tensor.requires_grad)
            torch.utils.swap_tensors(tensor, empty)
    reset = getattr(module, "reset_parameters", None)
    if reset is not None:
        reset()
    elif own:
        raise TypeError(f"{type(module).__name__} holds parameters or buffers but has no reset_parameters(), "
                        "so it cannot be initialised after a meta-device build; give it one")
    with torch.no_grad():
        for tensor, value in zip(kept, saved):
            tensor.copy_(value)
