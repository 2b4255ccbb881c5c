"""A layerzoo mixer against another library's layer: weights copied through a mapping of parameter
names, the same input, and outputs and gradients compared.

A mapping is {layerzoo parameter name: Mapped(counterpart names, take, offset)}: our tensor is
take(their tensors) + offset, where take is linear (a concatenation, a slice, a reshape). Being
linear, take also carries their gradients onto our parameters' shapes; the offset (Qwen3-Next's
norms store weight - 1) has none. Every parameter on both sides must be mapped or named as
unmapped, so a parameter added later cannot slip past the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import torch
from torch import nn

from layerzoo.testing import assert_close


def cat(*tensors: torch.Tensor) -> torch.Tensor:
    return torch.cat(tensors, dim=0)


@dataclass(frozen=True)
class Mapped:
    """Our parameter = take(*their parameters) + offset; take linear, cat by default."""

    theirs: tuple[str, ...]
    take: Callable[..., torch.Tensor] = cat
    offset: float = 0.0
    note: str = ""


Mapping = dict[str, Mapped]


def mapped_from(theirs: dict[str, torch.Tensor], entry: Mapped, ours_shape: torch.Size, gradient: bool = False) -> torch.Tensor:
    value = entry.take(*(theirs[name] for name in entry.theirs)).reshape(ours_shape)
    return value if gradient else value + entry.offset


def check_complete(ours: nn.Module, theirs: nn.Module, mapping: Mapping, unmapped: Sequence[str] = ()) -> None:
    """Every parameter of ours is a key, every parameter of theirs a source (or listed in unmapped)."""
    our_names = {name for name, _ in ours.named_parameters()}
    their_names = {name for name, _ in theirs.named_parameters()}
    sources = {name for entry in mapping.values() for name in entry.theirs}
    assert our_names == set(mapping), f"ours not mapped: {our_names - set(mapping)}; mapped but absent: {set(mapping) - our_names}"
    assert their_names - set(unmapped) == sources, (
        f"theirs not mapped: {their_names - set(unmapped) - sources}; sources absent: {sources - their_names}")


def load_theirs_into_ours(ours: nn.Module, theirs: nn.Module, mapping: Mapping, unmapped: Sequence[str] = ()) -> None:
    """Copy their (random or initialised) weights into ours through the mapping."""
    check_complete(ours, theirs, mapping, unmapped)
    their_params = dict(theirs.named_parameters())
    with torch.no_grad():
        for name, param in ours.named_parameters():
            param.copy_(mapped_from(their_params, mapping[name], param.shape))


def randomise(module: nn.Module, generator: torch.Generator, std: float = 0.3) -> None:
    """Every parameter of the counterpart drawn anew (an init would hide zero gates, unit norms)."""
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * std)


def compare_gradients(ours: nn.Module, theirs: nn.Module, mapping: Mapping, what: str, scale: float = 10.0) -> None:
    """Each of our parameters' gradient against their gradients carried through the mapping."""
    their_grads = {name: p.grad for name, p in theirs.named_parameters() if p.grad is not None}
    for name, param in ours.named_parameters():
        entry = mapping[name]
        missing = [n for n in entry.theirs if n not in their_grads]
        assert not missing, f"{what}: their {missing} got no gradient"
        expected = mapped_from(their_grads, entry, param.shape, gradient=True)
        assert param.grad is not None, f"{what}: our {name} got no gradient"
        assert_close(param.grad, expected, what=f"{what}: d{name}", scale=scale)


def loss_weights(*tensors: torch.Tensor, seed: int = 1) -> list[torch.Tensor]:
    """Fixed random weights for a loss sum(t * w): every output element reaches the gradients."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in tensors]
