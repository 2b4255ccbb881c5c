"""A new mixer's tensors from the attention layer it replaces (the tables of docs/convert.md).

Attention's projections (H query heads of width D over Hkv key/value heads, g = H / Hkv) map onto
the new mixer's whole, key/value heads expanded to H as grouped-query attention shares them:
query head h reads key/value head h // g (transformers' repeat_kv). The rest starts where the
layer can pass its input on nearly unchanged: short convolutions as the identity (last tap 1),
decays slow and input-independent, the input's own projections of gates at zero. Tensors the
table does not name keep the mixer's own initialisation.
"""

from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from ..blocks.short_conv import ShortConvolution
from ..mixers.attention import CausalAttention

# Slow decays for the recurrent targets: per head a step dt spread log-uniformly over
# [DT_MIN, DT_MAX] with A = 1, so head h keeps exp(-dt_h) of its memory per token: memories of
# 10 to 1000 tokens, the range Mamba-2's dt init spans, without its random draw.
DT_MIN, DT_MAX = 1e-3, 1e-1
# KDA's output gate sigmoid(g_proj x) starts input-independent at sigmoid(3) = 0.95: open.
OPEN_GATE_BIAS = 3.0


def projections(attention: CausalAttention) -> tuple[torch.Tensor, ...]:
    """The teacher's q (H D, d), k and v expanded to H heads (H D, d) each, and o (d, H D)."""
    group = attention.n_heads // attention.n_kv_heads
    k, v = attention.kv_proj.weight.unflatten(0, (2, attention.n_kv_heads, attention.head_dim))
    k, v = (heads.repeat_interleave(group, dim=0).flatten(0, 1) for heads in (k, v))
    return attention.q_proj.weight, k, v, attention.out_proj.weight


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


def same_weights(mixer: nn.Module, attention: CausalAttention) -> None:
    """attention or swa: every tensor the two layers share (an output gate or sinks the teacher
    lacks keep their own init)."""
    theirs = dict(attention.named_parameters())
    for name, tensor in mixer.named_parameters():
        if name in theirs:
            tensor.copy_(theirs[name])


def delta_rule(mixer: nn.Module, attention: CausalAttention) -> None:
    """gated_deltanet and kda: q, k, v, o; identity convolutions; beta = sigmoid(0) = 1/2; the
    decay g = -softplus(dt_bias) per head, input-independent (its input projection zero)."""
    q, k, v, o = projections(attention)
    for target, source in ((mixer.q_proj, q), (mixer.k_proj, k), (mixer.v_proj, v), (mixer.o_proj, o)):
        target.weight.copy_(source)
    for conv in (mixer.q_conv1d, mixer.k_conv1d, mixer.v_conv1d):
        identity(conv)
    mixer.b_proj.weight.zero_()
    mixer.A_log.zero_()
    bias = slow_decay_bias(mixer.n_heads)
    if hasattr(mixer, "a_proj"):  # Gated DeltaNet: a scalar decay per head
        mixer.a_proj.weight.zero_()
        mixer.dt_bias.copy_(bias)
    else:  # KDA: a decay per key channel, from a low-rank f_proj; its output gate open
        mixer.f_proj[1].weight.zero_()
        mixer.dt_bias.copy_(bias.repeat_interleave(mixer.head_dim))
        mixer.g_proj[1].weight.zero_()
        mixer.g_proj[1].bias.fill_(OPEN_GATE_BIAS)


def mamba2(mixer: nn.Module, attention: CausalAttention) -> None:
    """Mamba-in-the-Llama's mapping: x <- v, B <- k, C <- q (one group per head), out <- o; the
    convolution the identity; dt input-independent and slow (A = 1); z and D their own."""
    q, k, v, o = projections(attention)
    width = mixer.d_inner
    z, x, B, C, dt = mixer.in_proj.weight.split([width, width, width, width, mixer.n_heads])
    x.copy_(v)
    B.copy_(k)
    C.copy_(q)
    dt.zero_()
    mixer.out_proj.weight.copy_(o)
    identity(mixer.conv1d)
    mixer.A_log.zero_()
    mixer.dt_bias.copy_(slow_decay_bias(mixer.n_heads))


def mlstm(mixer: nn.Module, attention: CausalAttention) -> None:
    """q, k, v into in_proj, o into out_proj; the output gate's rows and the input and forget
    gates keep the layer's own init (xLSTM-7B's: slow to forget, small writes)."""
    q, k, v, o = projections(attention)
    q_rows, k_rows, v_rows, _ = mixer.in_proj.weight.split(mixer.widths)
    for rows, source in ((q_rows, q), (k_rows, k), (v_rows, v)):
        rows.copy_(source)
    mixer.out_proj.weight.copy_(o)


INITIALISERS: dict[str, Callable[[nn.Module, CausalAttention], None]] = {
    "attention": same_weights, "swa": same_weights, "gated_deltanet": delta_rule, "kda": delta_rule,
    "mamba2": mamba2, "mlstm": mlstm,
}


def initialise_from_attention(mixer: nn.Module, attention: CausalAttention) -> None:
    """Set `mixer`'s tensors from the teacher's `attention` layer, in place; the mixer's options
    are the ones targets.py derives (its widths fit attention's)."""
    with torch.no_grad():
        INITIALISERS[mixer.registry_name](mixer, attention)
