"""One layer against another implementation of it: the same input, then the outputs, the input's
gradient and every parameter's gradient compared at the computation's tolerance
(layerzoo.testing.assert_close). The weights are the caller's to map first; `to_ours` maps the
other side's parameter gradients onto layerzoo's names with the same mapping, read backwards."""

from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from layerzoo.testing import assert_close

# Gradients sum rounding errors over every token and channel: a few times the output's tolerance.
GRADIENT_SCALE = 10.0


def assert_same_layer(ours: nn.Module, theirs: nn.Module, x: torch.Tensor,
                      run_ours: Callable[[torch.Tensor], torch.Tensor],
                      run_theirs: Callable[[torch.Tensor], torch.Tensor],
                      to_ours: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]],
                      what: str, seed: int = 0) -> None:
    """run_ours(x) equals run_theirs(x), and so do the gradients of a random projection of the
    output with respect to x and to each parameter of `ours` (theirs mapped by to_ours)."""
    for module in (ours, theirs):
        module.zero_grad(set_to_none=True)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    y_ours, y_theirs = run_ours(x_ours), run_theirs(x_theirs)
    assert_close(y_ours, y_theirs, what=f"{what}: output")
    cotangent = torch.randn(y_theirs.shape, generator=torch.Generator().manual_seed(seed), dtype=y_theirs.dtype)
    (y_ours * cotangent).sum().backward()
    (y_theirs * cotangent).sum().backward()
    assert_close(x_ours.grad, x_theirs.grad, what=f"{what}: gradient of x", scale=GRADIENT_SCALE)
    theirs_grads = {name: torch.zeros_like(p) if p.grad is None else p.grad for name, p in theirs.named_parameters()}
    mapped = to_ours(theirs_grads)
    ours_params = dict(ours.named_parameters())
    assert mapped.keys() == ours_params.keys(), f"{what}: mapped {sorted(mapped)}, not {sorted(ours_params)}"
    for name, p in ours_params.items():
        grad = torch.zeros_like(p) if p.grad is None else p.grad
        assert_close(grad, mapped[name], what=f"{what}: gradient of {name}", scale=GRADIENT_SCALE)


def load_mapped(module: nn.Module, tensors: dict[str, torch.Tensor]) -> None:
    """Copy `tensors` into `module`'s parameters, which must be exactly those names and shapes."""
    params = dict(module.named_parameters())
    assert tensors.keys() == params.keys(), f"mapped {sorted(tensors)}, the module holds {sorted(params)}"
    with torch.no_grad():
        for name, tensor in tensors.items():
            assert params[name].shape == tensor.shape, f"{name}: {tuple(tensor.shape)} into {tuple(params[name].shape)}"
            params[name].copy_(tensor)
