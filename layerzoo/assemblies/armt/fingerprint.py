"""A cheap fingerprint of a model's parameters, to tell later whether any of them changed."""

from __future__ import annotations

import torch
from torch import nn

# Relative to a tensor's own magnitude: far below one optimizer step, far above the rounding of
# summing the same values in another order (another device).
TOLERANCE = 1e-9


def fingerprint(model: nn.Module) -> dict[str, torch.Tensor] | None:
    """Per parameter, its sum, sum of absolute values and sum of squares, in fp64 on the CPU
    ({name: (3,)}); None for a model on the meta device, whose values are not there yet."""
    parameters = dict(model.named_parameters())
    if any(parameter.is_meta for parameter in parameters.values()):
        return None
    with torch.no_grad():
        return {name: _statistics(parameter) for name, parameter in parameters.items()}


def changed(model: nn.Module, before: dict[str, torch.Tensor]) -> list[str]:
    """The names of model's parameters whose values differ from the fingerprint `before`
    (a parameter that appeared, disappeared or changed shape counts as changed)."""
    now = fingerprint(model) or {}
    names = sorted(set(now) | set(before))
    return [name for name in names if name not in now or name not in before or _differ(now[name], before[name])]


def _statistics(tensor: torch.Tensor) -> torch.Tensor:
    values = tensor.detach().double()
    return torch.stack((values.sum(), values.abs().sum(), values.square().sum())).cpu()


def _differ(now: torch.Tensor, before: torch.Tensor) -> bool:
    # The sum is compared against the sum of absolute values, the others against themselves.
    scale = torch.stack((before[1], before[1], before[2])).abs()
    return bool(((now - before).abs() > TOLERANCE * scale + torch.finfo(torch.float64).tiny).any())
