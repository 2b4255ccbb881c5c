"""Recomputing a layer's cheap elementwise steps in the backward instead of keeping their outputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.utils.checkpoint import checkpoint


def recomputed(function: Callable[..., Any], *args: Any) -> Any:
    """function(*args); under autograd only what it reads is kept for the backward, which runs it
    again. For the convolutions, norms and gates around a recurrent kernel: their outputs, kept,
    would outweigh the kernel's own workspace, and running them twice costs little beside the
    projections. function draws no random numbers (the generator's state is not replayed). Under
    torch.compile it runs plainly: the compiler's partitioner decides itself what to recompute."""
    if not torch.is_grad_enabled() or torch.compiler.is_compiling():
        return function(*args)
    return checkpoint(function, *args, use_reentrant=False, preserve_rng_state=False)
