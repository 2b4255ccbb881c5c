"""The dtype of states and arithmetic, whatever the inputs' dtype."""

from __future__ import annotations

import torch


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype states and arithmetic use for inputs of `dtype`: fp32, or fp64 for fp64 inputs
    (so tests can use fp64 as the yardstick)."""
    return torch.promote_types(dtype, torch.float32)


def upcast(t: torch.Tensor) -> torch.Tensor:
    """t in the compute dtype of its own: fp32 for bf16, fp16 and fp32 inputs, fp64 for fp64 (as
    `.float()` would not: a model run in fp64 as the yardstick keeps fp64 throughout)."""
    return t.to(compute_dtype(t.dtype))
