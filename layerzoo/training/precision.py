"""The precision a model computes in, as training, distillation and evaluation declare it.

`precision: auto | fp32 | bf16`: bf16 runs the forward under torch.autocast to bf16 (matmuls and
projections in bf16; the weights, their gradients and the optimizer's state stay fp32; kernels
keep their states and sums in fp32, kernels/common/autocast.py; losses, KL and log-softmax are
computed on fp32 logits); fp32 runs everything in fp32; auto is bf16 on a GPU that supports it,
fp32 elsewhere (the CPU).
"""

from __future__ import annotations

import contextlib
from typing import Literal

import torch

Precision = Literal["auto", "fp32", "bf16"]


def resolved_precision(precision: str, device: torch.device | str) -> str:
    """"bf16" or "fp32": what `precision` means on `device` (auto: bf16 on a GPU with bf16)."""
    device = torch.device(device)
    if precision == "auto":
        return "bf16" if device.type == "cuda" and torch.cuda.is_bf16_supported() else "fp32"
    return precision


def autocast_for(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The context a forward runs in at `precision` on `device`: bf16 autocast, or none (fp32).
    Reusable: enter it once per forward."""
    device = torch.device(device)
    if resolved_precision(precision, device) == "bf16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()
