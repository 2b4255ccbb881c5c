"""A layerzoo mixer against another implementation of it (docs/parity.md): weights carried across
by a declarative mapping of parameters, the same input, then the outputs, the input's gradient and
every parameter's gradient compared at the computation's tolerance (layerzoo.testing.assert_close).

A mapping is {layerzoo parameter name: Mapped(counterpart names, take, offset)}: our tensor is
take(their tensors) + offset, reshaped to our parameter's shape. take only moves elements (a
concatenation, a slice, a reshape, a split of a fused projection per head): `check_complete`
asserts that every parameter on both sides is in the mapping and that every element of theirs
lands on exactly one element of ours, so a parameter added later, a forgotten one, or slices
that overlap or leave rows out cannot slip past the comparison. Being a permutation, take also
carries their gradients onto our parameters (without the offset, which has none; Qwen3-Next's
norms store weight - 1), and read backwards it loads our weights into theirs
(`load_ours_into_theirs`), for the tests that draw our layer and build the counterpart from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn

from layerzoo.testing import assert_close

# Gradients sum rounding errors over every token and channel: a few times the output's tolerance.
GRADIENT_SCALE = 10.0
GRADIENT = "grad "  # the prefix of the gradients' names among `outcomes`


def cat(*tensors: torch.Tensor) -> torch.Tensor:
    return torch.cat(tensors, dim=0)


@dataclass(frozen=True)
class Mapped:
    """Our parameter = take(*their parameters) + offset; take moves elements only, cat by default."""

    theirs: tuple[str, ...]
    take: Callable[..., torch.Tensor] = cat
    offset: float = 0.0
    note: str = ""


Mapping = dict[str, Mapped]
Tensors = dict[str, torch.Tensor]


def in_our_names(ours: nn.Module, theirs: nn.Module | Tensors, mapping: Mapping, gradient: bool = False) -> Tensors:
    """Their tensors (a module's parameters, or {their name: tensor}: with gradient=True their
    gradients, which take no offset) by our parameters' names and in their shapes."""
    if isinstance(theirs, nn.Module):
        theirs = dict(theirs.named_parameters())
    mapped = {}
    with torch.no_grad():
        for name, param in ours.named_parameters():
            entry = mapping[name]
            value = entry.take(*(theirs[source] for source in entry.theirs)).reshape(param.shape)
            mapped[name] = value if gradient else value + entry.offset
    return mapped


def element_sources(ours: nn.Module, theirs: nn.Module, mapping: Mapping) -> tuple[Tensors, dict[str, slice]]:
    """({our name: the index of the element of theirs each of its elements is taken from},
    {their name: its elements' indices}), theirs' elements numbered one parameter after another."""
    where, ids, total = {}, {}, 0
    for name, param in theirs.named_parameters():
        where[name] = slice(total, total + param.numel())
        ids[name] = torch.arange(total, total + param.numel()).view(param.shape)
        total += param.numel()
    return in_our_names(ours, ids, mapping, gradient=True), where


def check_complete(ours: nn.Module, theirs: nn.Module, mapping: Mapping) -> None:
    """Every parameter of ours is a key, every parameter of theirs a source, and every element of
    theirs is taken into exactly one element of ours (the takes together are a permutation)."""
    our_names = {name for name, _ in ours.named_parameters()}
    their_names = {name for name, _ in theirs.named_parameters()}
    sources = {name for entry in mapping.values() for name in entry.theirs}
    assert our_names == set(mapping), (
        f"ours not mapped: {our_names - set(mapping)}; mapped but absent: {set(mapping) - our_names}")
    assert their_names == sources, f"theirs not mapped: {their_names - sources}; sources absent: {sources - their_names}"
    index, where = element_sources(ours, theirs, mapping)
    total = sum(p.numel() for p in theirs.parameters())
    taken = torch.cat([i.flatten() for i in index.values()])
    assert taken.min() >= 0 and taken.max() < total, "a take computes, not only moves, elements"
    counts = torch.bincount(taken, minlength=total)
    wrong = [f"{name} ({int((counts[at] == 0).sum())} elements never taken, {int((counts[at] > 1).sum())} taken "
             "more than once)" for name, at in where.items() if not torch.all(counts[at] == 1)]
    assert not wrong, f"the mapping does not take each element of theirs once: {', '.join(wrong)}"


def load_theirs_into_ours(ours: nn.Module, theirs: nn.Module, mapping: Mapping) -> None:
    """Copy their (random or initialised) weights into ours through the mapping."""
    check_complete(ours, theirs, mapping)
    with torch.no_grad():
        for name, value in in_our_names(ours, theirs, mapping).items():
            ours.get_parameter(name).copy_(value)


def load_ours_into_theirs(theirs: nn.Module, ours: nn.Module, mapping: Mapping) -> None:
    """Copy our weights into theirs: the mapping read backwards (each element of ours back to
    where its take found it, less the offset)."""
    check_complete(ours, theirs, mapping)
    index, where = element_sources(ours, theirs, mapping)
    flat = torch.empty(sum(p.numel() for p in theirs.parameters()), dtype=torch.float64)
    for name, param in ours.named_parameters():
        flat[index[name].flatten()] = (param.detach().double() - mapping[name].offset).flatten()
    with torch.no_grad():
        for name, param in theirs.named_parameters():
            param.copy_(flat[where[name]].view(param.shape))


def randomise(module: nn.Module, generator: torch.Generator, std: float = 0.3) -> None:
    """Every parameter of the counterpart drawn anew (an init would hide zero gates, unit norms)."""
    with torch.no_grad():
        for param in module.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * std)


def loss_weights(*tensors: torch.Tensor, seed: int = 1) -> list[torch.Tensor]:
    """Fixed random weights for a loss sum(t * w): every output element reaches the gradients.
    Drawn in fp64 and rounded to each tensor's dtype, so that layers run in fp32 and in fp64
    see the same loss."""
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(t.shape, generator=gen, dtype=torch.float64).to(t.dtype) for t in tensors]


def outcomes(ours: nn.Module, theirs: nn.Module, mapping: Mapping, x: torch.Tensor,
             forward: Callable[[torch.Tensor, torch.Tensor], tuple[Tensors | torch.Tensor, Tensors | torch.Tensor]],
             seed: int = 1) -> tuple[Tensors, Tensors]:
    """({name: tensor} of ours, the same of theirs): the outputs forward(x_ours, x_theirs) returns
    for each side (a tensor, named "output", or {name: tensor}, the same names on both), then the gradients
    of a loss sum(output * w) over all of them (w: loss_weights, the same on both sides) with
    respect to x ("grad x") and to each of our parameters ("grad <name>"), theirs carried onto ours
    through the mapping. A parameter that gets no gradient on either side fails."""
    for module in (ours, theirs):
        module.zero_grad(set_to_none=True)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours_out, theirs_out = ({"output": out} if isinstance(out, torch.Tensor) else dict(out)
                            for out in forward(x_ours, x_theirs))
    assert ours_out.keys() == theirs_out.keys(), f"outputs {sorted(ours_out)} against {sorted(theirs_out)}"
    weights = loss_weights(*theirs_out.values(), seed=seed)
    for out in (ours_out, theirs_out):
        sum((t * w).sum() for t, w in zip(out.values(), weights)).backward()
    ours_out[f"{GRADIENT}x"], theirs_out[f"{GRADIENT}x"] = x_ours.grad, x_theirs.grad
    missing = [f"their {name}" for name, p in theirs.named_parameters() if p.grad is None]
    missing += [f"our {name}" for name, p in ours.named_parameters() if p.grad is None]
    assert not missing, f"no gradient reached {', '.join(missing)}"
    their_grads = in_our_names(ours, {name: p.grad for name, p in theirs.named_parameters()}, mapping, gradient=True)
    for name, param in ours.named_parameters():
        ours_out[f"{GRADIENT}{name}"], theirs_out[f"{GRADIENT}{name}"] = param.grad, their_grads[name]
    return ours_out, theirs_out


def tolerance_scale(name: str) -> float:
    """How many times the computation's tolerance an outcome of that name is compared at."""
    return GRADIENT_SCALE if name.startswith(GRADIENT) else 1.0


def assert_same_layer(ours: nn.Module, theirs: nn.Module, mapping: Mapping, x: torch.Tensor, forward,
                      what: str, seed: int = 1, scales: dict[str, float] | None = None) -> None:
    """Every one of `outcomes` equal on both sides: each output at the tolerance, the gradients of
    x and of every parameter at GRADIENT_SCALE times it; `scales` overrides the factor by outcome
    name ("grad A_log")."""
    ours_out, theirs_out = outcomes(ours, theirs, mapping, x, forward, seed)
    scales = scales or {}
    for name, got in ours_out.items():
        assert_close(got, theirs_out[name], what=f"{what}: {name}", scale=scales.get(name, tolerance_scale(name)))


def assert_round_trips(ours: nn.Module, theirs: nn.Module, mapping: Mapping) -> None:
    """Our weights loaded into theirs and read back through the mapping are ours, exactly."""
    load_ours_into_theirs(theirs, ours, mapping)
    back = in_our_names(ours, theirs, mapping)
    for name, param in ours.named_parameters():
        assert torch.equal(back[name], param), f"{name} does not come back from theirs"
