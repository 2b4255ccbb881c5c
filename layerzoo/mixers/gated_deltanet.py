"""Gated DeltaNet (Yang, Kautz, Hatamizadeh 2024): the gated delta rule as a token mixer.

Per head, a (K, V) memory S decays by exp(g_t) and is corrected towards v_t at key k_t with
strength beta_t, then read at q_t. The layer follows flash-linear-attention's GatedDeltaNet:
short causal convolutions with SiLU on q, k, v; L2-normalised q and k; beta = sigmoid(b_proj x);
g = -exp(A_log) softplus(a_proj x + dt_bias); output RMSNorm(o) * SiLU(g_proj x), then o_proj.
Parameter names match fla's layer, so its checkpoints map over (conv weights squeezed to
(channels, width)).
"""

from __future__ import annotations

import dataclasses
import math
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
from ..errors import OptionError
from ..kernels.common.dtypes import upcast
from ..kernels.gated_delta_rule import BACKENDS, gated_delta_rule
from ..options import option
from ..registry import register_mixer
from .base import Mixer, MixerOptions
from .decay_gates import init_decay_rate, init_time_step_bias
from .from_attention import TeacherAttention, identity, slow_decay_bias

if TYPE_CHECKING:
    from .attention import CausalAttention


@dataclass
class GatedDeltaNetState:
    """Streaming state of Gated DeltaNet and Kimi Delta Attention; its size does not grow with the sequence.

    The convolution caches hold the last inputs of each short convolution (projections before the
    convolution), oldest first, in the model's dtype; None without short convolutions.

    Attributes:
        q_conv: (B, conv_size - 1, n_heads * head_dim), the q convolution's cache.
        k_conv: (B, conv_size - 1, n_heads * head_dim), the k convolution's cache.
        v_conv: (B, conv_size - 1, n_heads * head_v_dim), the v convolution's cache.
        recurrent: (B, n_heads, head_dim, head_v_dim), the memory S, fp32 whatever the model's dtype.
    """

    q_conv: torch.Tensor | None
    k_conv: torch.Tensor | None
    v_conv: torch.Tensor | None
    recurrent: torch.Tensor


def l2_normalize(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """x / sqrt(sum(x^2) + eps) over the last dimension, computed in fp32; x's dtype out.

    fla's formula: the eps inside the root keeps the gradient finite at x = 0.
    """
    x32 = upcast(x)
    return (x32 * torch.rsqrt(x32.pow(2).sum(-1, keepdim=True) + eps)).to(x.dtype)


@dataclass(frozen=True)
class GatedDeltaNetOptions(MixerOptions):
    """Gated DeltaNet's options; Kimi Delta Attention's are the same, with its own defaults."""

    n_heads: int = option(4, min=1, help="heads")
    head_dim: int | None = option(None, min=1, help="key width per head; null: d_model // n_heads")
    expand_v: float = option(2.0, above=0.0, help="value width per head: expand_v * head_dim")
    use_short_conv: bool = option(True, help="short causal convolutions with SiLU on q, k and v (else SiLU alone)")
    conv_size: int = option(4, min=1, help="width of the short convolutions")
    norm_eps: float = option(1e-5, above=0.0, help="epsilon of the output RMSNorm")
    chunk_size: int = option(64, min=1, help="chunk length of the chunkwise kernel")
    backend: str = option("auto", choices=("auto", *BACKENDS), help="the gated_delta_rule kernel backend")

    def check(self, d_model: int) -> None:
        if self.head_dim is None and d_model % self.n_heads:
            raise OptionError("n_heads", f"d_model {d_model} is not divisible by n_heads {self.n_heads}; set head_dim")
        key_dim = self.head_dim or d_model // self.n_heads
        value_dim = key_dim * self.expand_v
        if not math.isclose(value_dim, round(value_dim)) or round(value_dim) < 1:
            raise OptionError("expand_v", f"head_dim {key_dim} * expand_v {self.expand_v} must be a positive integer")


class DeltaRuleLayer(Mixer):
    """What Gated DeltaNet and Kimi Delta Attention share: q, k, v projections (q_proj, k_proj,
    v_proj), each through a short causal convolution with SiLU (q_conv1d, k_conv1d, v_conv1d, or
    SiLU alone where those are None, as fla), q and k L2-normalised; and the state,
    GatedDeltaNetState. A subclass calls build_inputs first, then builds the rest (the
    convolutions, its A_log, which places the state), and calls read_inputs in `mix`.
    """

    packs_sequences = True

    def build_inputs(self) -> tuple[int, int]:
        """Set the widths and options, and build q_proj, k_proj, v_proj (the layer's first modules):
        (the key width n_heads * head_dim, the value width n_heads * head_v_dim)."""
        config = self.options
        self.n_heads = config.n_heads
        self.head_dim = config.head_dim or self.d_model // config.n_heads
        self.head_v_dim = round(self.head_dim * config.expand_v)
        self.conv_size, self.chunk_size, self.backend = config.conv_size, config.chunk_size, config.backend
        key_width, value_width = self.n_heads * self.head_dim, self.n_heads * self.head_v_dim
        self.q_proj = Linear(self.d_model, key_width, bias=False)
        self.k_proj = Linear(self.d_model, key_width, bias=False)
        self.v_proj = Linear(self.d_model, value_width, bias=False)
        return key_width, value_width

    def read_inputs(self, x: torch.Tensor, state: GatedDeltaNetState | None, cu_seqlens: torch.Tensor | None):
        """x (B, T, d_model) -> q, k (B, T, n_heads, head_dim), v (B, T, n_heads, head_v_dim) and
        the state with its convolution caches advanced (the recurrent state is the caller's)."""
        streams = x.shape[0] if cu_seqlens is None else len(cu_seqlens) - 1
        state = self.init_state(streams) if state is None else state
        return recomputed(self._activate_inputs, self.q_proj(x), self.k_proj(x), self.v_proj(x), state, cu_seqlens)

    def _activate_inputs(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, state: GatedDeltaNetState,
                         cu_seqlens: torch.Tensor | None):
        """The projections (B, T, width) through the convolutions and the L2 norms: read_inputs' result."""
        q, q_conv = self._short_conv(self.q_conv1d, q, state.q_conv, cu_seqlens)
        k, k_conv = self._short_conv(self.k_conv1d, k, state.k_conv, cu_seqlens)
        v, v_conv = self._short_conv(self.v_conv1d, v, state.v_conv, cu_seqlens)
        q = l2_normalize(q.unflatten(-1, (self.n_heads, self.head_dim)))
        k = l2_normalize(k.unflatten(-1, (self.n_heads, self.head_dim)))
        v = v.unflatten(-1, (self.n_heads, self.head_v_dim))
        return q, k, v, GatedDeltaNetState(q_conv, k_conv, v_conv, state.recurrent)

    @classmethod
    def options_from_attention(cls, teacher: TeacherAttention) -> dict[str, Any]:
        """q, k, v, o of the teacher's H heads of width D."""
        return {"n_heads": teacher.n_heads, "head_dim": teacher.head_dim, "expand_v": 1.0}

    def init_from_attention(self, attention: CausalAttention) -> None:
        """q, k, v, o from attention's; identity convolutions; beta = sigmoid(0) = 1/2; A = 1. The
        subclass adds its decay, slow and input-independent."""
        q, k, v, o = attention.head_projections()
        for target, source in ((self.q_proj, q), (self.k_proj, k), (self.v_proj, v), (self.o_proj, o)):
            target.weight.copy_(source)
        for conv in (self.q_conv1d, self.k_conv1d, self.v_conv1d):
            identity(conv)
        self.b_proj.weight.zero_()
        self.A_log.zero_()

    def gated_output(self, o: torch.Tensor, gate: torch.Tensor, activation) -> torch.Tensor:
        """The kernel's output o (B, T, n_heads, head_v_dim) normed per head, times activation(gate)
        (the same shape): (B, T, n_heads * head_v_dim), o_proj's input."""
        return (self.o_norm(o) * activation(gate)).flatten(2)

    @staticmethod
    def _short_conv(conv: ShortConvolution | None, x: torch.Tensor, cache: torch.Tensor | None,
                    cu_seqlens: torch.Tensor | None):
        """(activation, new cache): the convolution with SiLU, or SiLU alone without one (as fla)."""
        return (F.silu(x), None) if conv is None else conv(x, cache, cu_seqlens=cu_seqlens)

    def init_state(self, batch_size: int) -> GatedDeltaNetState:
        """The empty (all-zero) GatedDeltaNetState for `batch_size` sequences.

        Args:
            batch_size: sequences B the state holds.

        Returns:
            GatedDeltaNetState with q_conv, k_conv (B, conv_size - 1, n_heads * head_dim) and
                v_conv (B, conv_size - 1, n_heads * head_v_dim) in the weights' dtype (None without
                short convolutions), and recurrent (B, n_heads, head_dim, head_v_dim) in fp32.
        """
        caches = [None if conv is None else conv.init_state(batch_size)
                  for conv in (self.q_conv1d, self.k_conv1d, self.v_conv1d)]
        recurrent = self.A_log.new_zeros(batch_size, self.n_heads, self.head_dim, self.head_v_dim, dtype=torch.float32)
        return GatedDeltaNetState(*caches, recurrent)

    def state_size(self, seq_len: int) -> int:
        """Elements per sequence, whatever seq_len: the convolutions' caches and the memory S.

        Args:
            seq_len: tokens seen (the size does not depend on it).

        Returns:
            (conv_size - 1) * n_heads * (2 * head_dim + head_v_dim) (0 without short
                convolutions) + n_heads * head_dim * head_v_dim.
        """
        conv_width = self.n_heads * (2 * self.head_dim + self.head_v_dim)
        conv = (self.conv_size - 1) * conv_width if self.q_conv1d is not None else 0
        return conv + self.n_heads * self.head_dim * self.head_v_dim


@register_mixer("gated_deltanet", test_options={"n_heads": 2, "head_dim": 8, "chunk_size": 4})
class GatedDeltaNet(DeltaRuleLayer):
    """Gated DeltaNet: a decaying delta-rule memory per head, constant state, chunkwise-parallel.

    Shapes: x (B, T, d_model) -> (B, T, d_model). head_dim (the key width K) defaults to
    d_model // n_heads; values are expand_v times wider. `backend` and `chunk_size` go to
    `gated_delta_rule`; its "auto" runs single-token steps (decoding) as one recurrent step.
    The streaming state is a GatedDeltaNetState (see `init_state`).

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers gated_deltanet`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: d_model does not divide by n_heads (without head_dim), or head_dim *
            expand_v is not a positive integer.
    """

    layer_type = "linear_attention"
    Options = GatedDeltaNetOptions

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        key_width, value_width = self.build_inputs()
        n_heads, config = self.n_heads, self.options
        self.a_proj = Linear(d_model, n_heads, bias=False)
        self.b_proj = Linear(d_model, n_heads, bias=False)
        self.g_proj = Linear(d_model, value_width, bias=False)
        self.o_proj = Linear(value_width, d_model, bias=False)
        convs = [ShortConvolution(width, config.conv_size) if config.use_short_conv else None
                 for width in (key_width, key_width, value_width)]
        self.q_conv1d, self.k_conv1d, self.v_conv1d = convs
        self.o_norm = RMSNorm(self.head_v_dim, eps=config.norm_eps)
        self.A_log = nn.Parameter(torch.empty(n_heads))
        self.dt_bias = nn.Parameter(torch.empty(n_heads))
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """Mamba-2's gate init (decay_gates.py): A ~ U(0, 16); dt log-uniform in [1e-3, 0.1]."""
        init_decay_rate(self.A_log, 0, 16)
        init_time_step_bias(self.dt_bias)

    def init_from_attention(self, attention: CausalAttention) -> None:
        """As DeltaRuleLayer's, and the decay g = -softplus(dt_bias) per head, its input projection zero."""
        super().init_from_attention(attention)
        self.a_proj.weight.zero_()
        self.dt_bias.copy_(slow_decay_bias(self.n_heads))

    def mix(self, x: torch.Tensor, state: GatedDeltaNetState | None, cu_seqlens: torch.Tensor | None):
        q, k, v, state = self.read_inputs(x, state, cu_seqlens)
        # Gates in fp32: g sums over thousands of steps inside the kernel.
        beta = upcast(self.b_proj(x)).sigmoid()
        g = -upcast(self.A_log).exp() * F.softplus(upcast(self.a_proj(x)) + upcast(self.dt_bias))
        o, recurrent = gated_delta_rule(
            q, k, v, g, beta,
            initial_state=state.recurrent,
            output_final_state=True,
            chunk_size=self.chunk_size,
            backend=self.backend,
            cu_seqlens=cu_seqlens,
        )
        gate = self.g_proj(x).unflatten(-1, (self.n_heads, self.head_v_dim))
        y = self.o_proj(recomputed(self.gated_output, o, gate, F.silu))
        return y, dataclasses.replace(state, recurrent=recurrent)
