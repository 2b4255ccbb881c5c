"""A mixer made from the attention layer it replaces (`layerzoo convert`): the teacher layer's
shape, and the starts the recurrent mixers share.

A mixer is a conversion target when its class defines both

    @classmethod
    def options_from_attention(cls, teacher: TeacherAttention) -> dict: ...  # the options its weights need
    def init_from_attention(self, attention: CausalAttention) -> None: ...   # its tensors, in place

and, optionally, `defaults_from_attention`: the options that start at the teacher layer's value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..blocks.short_conv import ShortConvolution

# Slow decays: per head a step dt spread log-uniformly over [DT_MIN, DT_MAX] with A = 1, so head h
# keeps exp(-dt_h) of its memory per token: memories of 10 to 1000 tokens, the range Mamba-2's dt
# init spans, without its random draw.
DT_MIN, DT_MAX = 1e-3, 1e-1


@dataclass(frozen=True)
class TeacherAttention:
    """The attention layer a converted mixer replaces: n_heads (H) query heads of width head_dim
    (D) over n_kv_heads key/value heads, in a model of width d_model; options: all of its options."""

    d_model: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    options: dict[str, Any]

    @classmethod
    def of(cls, options: dict[str, Any], d_model: int) -> TeacherAttention:
        """The shape of an attention layer with these (complete) options at width d_model."""
        n_heads = options["n_heads"]
        return cls(d_model, n_heads, options["n_kv_heads"] or n_heads, options["head_dim"] or d_model // n_heads,
                   dict(options))

    @property
    def width(self) -> int:
        """H D: the queries' width, and the keys' and values' once expanded to H heads."""
        return self.n_heads * self.head_dim


def identity(conv: ShortConvolution | None) -> None:
    """A short convolution that passes each channel's current input through (before its SiLU)."""
    if conv is None:
        return
    conv.weight.zero_()
    conv.weight[:, -1] = 1.0
    if conv.bias is not None:
        conv.bias.zero_()


def slow_decay_bias(n_heads: int) -> torch.Tensor:
    """(n_heads,) softplus^-1(dt), dt log-spaced over [DT_MIN, DT_MAX] across the heads."""
    dt = torch.logspace(math.log10(DT_MIN), math.log10(DT_MAX), n_heads, dtype=torch.float64)
    return (dt + torch.log(-torch.expm1(-dt))).float()
