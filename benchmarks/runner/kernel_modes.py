"""A kernel call timed two ways: its forward without autograd, and forward then backward."""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable
from unittest import mock

import torch

MODES = ("forward", "forward_backward")


def compiled_kernel_loads(family: str) -> bool:
    """Whether `family`'s compiled CPU kernel builds and loads here (layerzoo.kernels.<family>.native)."""
    return importlib.import_module(f"layerzoo.kernels.{family}.native").COMPILED.load() is not None


def without_compiled_kernels():
    """The compiled CPU kernels turned off (LAYERZOO_NATIVE=0): their PyTorch code runs, what runs
    where no C++ compiler is."""
    return mock.patch.dict(os.environ, {"LAYERZOO_NATIVE": "0"})


def kernel_modes(run: Callable[..., torch.Tensor], inputs: list[torch.Tensor], grad_out: torch.Tensor,
                 implementation: Callable[[], contextlib.AbstractContextManager] = contextlib.nullcontext) -> dict:
    """{"forward": fn, "forward_backward": fn} of run(*inputs) -> out, out shaped as grad_out.

    The forward runs under no_grad on inputs; forward+backward on copies of them that need
    gradients, backpropagating grad_out: a dense gradient, since out.sum().backward() would pass a
    stride-0 one, which takes other paths. implementation() is entered around every call (the
    compiled kernels turned off, say).
    """
    leaves = [t.detach().clone().requires_grad_() for t in inputs]

    def forward() -> None:
        with torch.no_grad(), implementation():
            run(*inputs)

    def forward_backward() -> None:
        with implementation():
            run(*leaves).backward(grad_out)
        for t in leaves:
            t.grad = None

    return {"forward": forward, "forward_backward": forward_backward}
