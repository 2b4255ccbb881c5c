"""Kernels compute in their own precision under autocast.

A model run under torch.autocast (bf16 training, distillation, evaluation) hands the kernels bf16
projections; each kernel upcasts them itself and keeps its state and sums in fp32. Autocast must
not reach inside: it would round the chunked matmuls that build a recurrent state to bf16 at every
chunk (and some ops, like CPU's triangular solve, have no bf16 version at all).
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

import torch

Function = TypeVar("Function", bound=Callable)


def outside_autocast(fn: Function) -> Function:
    """fn run with CPU and CUDA autocast off: its arithmetic follows its inputs' dtypes alone."""

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if not (torch.is_autocast_enabled("cpu") or torch.is_autocast_enabled("cuda")):
            return fn(*args, **kwargs)  # nothing to turn off: no autocast region in a traced or exported graph
        with torch.autocast("cpu", enabled=False), torch.autocast("cuda", enabled=False):
            return fn(*args, **kwargs)

    return run  # type: ignore[return-value]
