"""Kimi Delta Attention (Kimi Linear, Moonshot AI 2025): the delta rule with a decay per key
channel, as a token mixer on `layerzoo.kernels.kda`.

Gated DeltaNet's layer with a finer forget gate. Per head, a (K, V) memory S decays row by row,
by exp(g_t) with one g per key channel, and is corrected towards v_t at key k_t with strength
beta_t, then read at q_t. The layer follows flash-linear-attention's KimiDeltaAttention: short
causal convolutions with SiLU on q, k, v; L2-normalised q and k; beta = sigmoid(b_proj x); the
decay g = -exp(A_log) softplus(f + dt_bias) from a low-rank projection f = f_proj x (rank
head_v_dim), A_log per head and dt_bias per key channel; the output RMSNorm(o) * sigmoid(gate),
the gate a low-rank projection with a bias, then o_proj. Parameter names match fla's layer, so its
checkpoints map over (conv weights squeezed to (channels, width)). The state is Gated DeltaNet's
(GatedDeltaNetState), and so are the q, k, v path and the state's size (gated_deltanet.DeltaRuleLayer).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from ..blocks.meta import reset_unless_meta
from ..blocks.norms import RMSNorm
from ..blocks.projections import Linear
from ..blocks.recompute import recomputed
from ..blocks.short_conv import ShortConvolution
from ..kernels.common.dtypes import upcast
from ..kernels.kda import BACKENDS, kda
from ..options import option
from ..registry import register_mixer
from .decay_gates import init_decay_rate
from .from_attention import slow_decay_bias
from .gated_deltanet import DeltaRuleLayer, GatedDeltaNetOptions, GatedDeltaNetState

if TYPE_CHECKING:
    from .attention import CausalAttention

# Converted from attention, the output gate sigmoid(g_proj x) starts input-independent at sigmoid(3) = 0.95: open.
OPEN_GATE_BIAS = 3.0


@dataclass(frozen=True)
class KimiDeltaAttentionOptions(GatedDeltaNetOptions):
    expand_v: float = option(1.0, above=0.0, help="value width per head: expand_v * head_dim")
    backend: str = option("auto", choices=("auto", *BACKENDS), help="the kda kernel backend")


@register_mixer("kda", test_options={"n_heads": 2, "head_dim": 8, "chunk_size": 4})
class KimiDeltaAttention(DeltaRuleLayer):
    """Kimi Delta Attention: a delta-rule memory per head decaying per key channel, constant state.

    Shapes: x (B, T, d_model) -> (B, T, d_model). head_dim (the key width K) defaults to
    d_model // n_heads; values are expand_v times wider. The low-rank decay and output-gate
    projections go through head_v_dim channels. `backend` and `chunk_size` go to `kda`; its "auto"
    runs single-token steps (decoding) as one recurrent step. The streaming state is a
    GatedDeltaNetState (see `init_state`).

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers kda`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: d_model does not divide by n_heads (without head_dim), or head_dim *
            expand_v is not a positive integer.
    """

    layer_type = "linear_attention"
    Options = KimiDeltaAttentionOptions

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        key_width, value_width = self.build_inputs()
        n_heads, config = self.n_heads, self.options
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (ShortConvolution(width, config.conv_size) if config.use_short_conv
                                                       else None for width in (key_width, key_width, value_width))
        self.f_proj = nn.Sequential(Linear(d_model, self.head_v_dim, bias=False),
                                    Linear(self.head_v_dim, key_width, bias=False))
        self.b_proj = Linear(d_model, n_heads, bias=False)
        self.A_log = nn.Parameter(torch.empty(n_heads))
        self.dt_bias = nn.Parameter(torch.empty(key_width))
        self.g_proj = nn.Sequential(Linear(d_model, self.head_v_dim, bias=False),
                                    Linear(self.head_v_dim, value_width, bias=True))
        self.o_norm = RMSNorm(self.head_v_dim, eps=config.norm_eps)
        self.o_proj = Linear(value_width, d_model, bias=False)
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """fla's KDA init: A ~ U(1, 16) per head (decay_gates.py), dt_bias = 0 per key channel."""
        init_decay_rate(self.A_log, 1, 16)
        nn.init.zeros_(self.dt_bias)

    def init_from_attention(self, attention: CausalAttention) -> None:
        """As DeltaRuleLayer's; the decay per key channel from f_proj, input-independent (its
        up-projection zero), each head's slow dt on all its channels; the output gate open."""
        super().init_from_attention(attention)
        self.f_proj[1].weight.zero_()
        self.dt_bias.copy_(slow_decay_bias(self.n_heads).repeat_interleave(self.head_dim))
        self.g_proj[1].weight.zero_()
        self.g_proj[1].bias.fill_(OPEN_GATE_BIAS)

    def mix(self, x: torch.Tensor, state: GatedDeltaNetState | None, cu_seqlens: torch.Tensor | None):
        q, k, v, state = self.read_inputs(x, state, cu_seqlens)
        # Gates in fp32: g sums over thousands of steps inside the kernel.
        beta = upcast(self.b_proj(x)).sigmoid()
        f = (upcast(self.f_proj(x)) + upcast(self.dt_bias)).unflatten(-1, (self.n_heads, self.head_dim))
        g = -upcast(self.A_log).exp()[:, None] * F.softplus(f)
        o, recurrent = kda(
            q, k, v, g, beta,
            initial_state=state.recurrent,
            output_final_state=True,
            chunk_size=self.chunk_size,
            backend=self.backend,
            cu_seqlens=cu_seqlens,
        )
        gate = self.g_proj(x).unflatten(-1, (self.n_heads, self.head_v_dim))
        y = self.o_proj(recomputed(self.gated_output, o, gate, torch.sigmoid))
        return y, dataclasses.replace(state, recurrent=recurrent)
