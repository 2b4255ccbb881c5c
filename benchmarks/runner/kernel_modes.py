"""A kernel call timed two ways: its forward without autograd, and forward then backward."""

from __future__ import annotations

import importlib
from collections.abc import Callable

import torch

MODES = ("forward", "forward_backward")


def compiled_kernel_loads(family: str) -> bool:
    """Whether `family`'s compiled CPU kernel, its "native" backend, builds and loads here
    (layerzoo.kernels.<family>.native)."""
    return importlib.import_module(f"layerzoo.kernels.{family}.native").COMPILED.load() is not None


def kernel_modes(run: Callable[..., torch.Tensor], inputs: list[torch.Tensor], grad_out: torch.Tensor) -> dict:
    """{"forward": fn, "forward_backward": fn} of run(*inputs) -> out, out shaped as grad_out.

    The forward runs under no_grad on inputs; forward+backward on copies of them that need
    gradients, backpropagating grad_out: a dense gradient, since out.sum().backward() would pass a
    stride-0 one, which takes other paths.
    """
    leaves = [t.detach().clone().requires_grad_() for t in inputs]

    def forward() -> None:
        with torch.no_grad():
            run(*inputs)

    def forward_backward() -> None:
        run(*leaves).backward(grad_out)
        for t in leaves:
            t.grad = None

    return {"forward": forward, "forward_backward": forward_backward}
