"""flash-linear-attention's Kimi Delta Attention layer, transcribed to run on CPU, as the
counterpart of layerzoo's KimiDeltaAttention (docs/parity.md).

fla-core 0.6.0 (what is installed) ships fla's ops and modules but not its layers, and its Triton
kernels (chunk_kda, fused_kda_gate, FusedRMSNormGated, the short convolution) fail on CPU. So
FlaKimiDeltaAttention is a transcription of `KimiDeltaAttention.__init__` and `forward` in
fla-org/flash-linear-attention fla/layers/kda.py (the stored version, commit 0812a88c), for its
configuration num_v_heads = num_heads, allow_neg_eigval False, conv_bias False, no cache, no
padding mask; each Triton piece is replaced by what it computes:
- ShortConvolution: it subclasses nn.Conv1d(C, C, W, groups=C, padding=W - 1); y = SiLU(conv(x))
  cut to the first T steps;
- use_qk_l2norm_in_kernel: fla's l2norm, x / sqrt(sum x^2 + 1e-6) (fla/modules/norm/l2norm.py);
- use_gate_in_kernel: fla's naive_kda_gate (fla/ops/kda/gate.py),
  g = -exp(A_log)[h] * softplus(g + dt_bias);
- chunk_kda: fla's own naive_recurrent_kda (fla/ops/kda/naive.py, loaded alone by
  layerzoo.testing.peers.load_fla_naive);
- FusedRMSNormGated(activation="sigmoid"): the Triton kernel's formula, x * rsqrt(mean x^2 + eps)
  * weight * sigmoid(gate) (fla/modules/norm/fused_norm_gate.py).
Its parameter names and initialisation are fla's layer's (nn.Linear and nn.Conv1d defaults;
A_log = log U(1, 16); dt_bias = 0; the norm's weight 1).

The mapping onto layerzoo's names (FLA, tests/helpers/parity_mapping.py) is the identity but for
the convolution weights, fla's (C, 1, W) nn.Conv1d weights against layerzoo's (C, W).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from layerzoo.mixers import KimiDeltaAttention
from layerzoo.testing.peers import load_fla_naive

from .parity_mapping import Mapped, Mapping, load_ours_into_theirs

# layerzoo's parameters by fla's names: the same tensors, but the convolutions' channel dim.
SAME = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "f_proj.0.weight", "f_proj.1.weight", "b_proj.weight",
        "A_log", "dt_bias", "g_proj.0.weight", "g_proj.1.weight", "g_proj.1.bias", "o_norm.weight", "o_proj.weight")
CONVS = ("q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight")
FLA: Mapping = {name: Mapped((name,)) for name in SAME} | {
    name: Mapped((name,), lambda w: w[:, 0], note=f"{name}[:, 0]") for name in CONVS}


class SigmoidGatedRMSNorm(nn.Module):
    """FusedRMSNormGated(hidden_size, activation="sigmoid", eps=eps) in PyTorch."""

    def __init__(self, hidden_size: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden_size))

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight * gate.sigmoid()


class FlaKimiDeltaAttention(nn.Module):
    """fla's KimiDeltaAttention layer (see the module docstring): x (B, T, d) -> (y, final state)."""

    def __init__(self, hidden_size: int, head_dim: int, num_heads: int, expand_v: float = 1.0, conv_size: int = 4,
                 norm_eps: float = 1e-5):
        super().__init__()
        self.head_k_dim, self.num_heads = head_dim, num_heads
        self.head_v_dim = int(head_dim * expand_v)
        key_dim, value_dim = num_heads * head_dim, num_heads * self.head_v_dim
        self.q_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.k_proj = nn.Linear(hidden_size, key_dim, bias=False)
        self.v_proj = nn.Linear(hidden_size, value_dim, bias=False)
        self.q_conv1d, self.k_conv1d, self.v_conv1d = (
            nn.Conv1d(width, width, conv_size, padding=conv_size - 1, groups=width, bias=False)
            for width in (key_dim, key_dim, value_dim))
        self.f_proj = nn.Sequential(nn.Linear(hidden_size, self.head_v_dim, bias=False),
                                    nn.Linear(self.head_v_dim, key_dim, bias=False))
        self.b_proj = nn.Linear(hidden_size, num_heads, bias=False)
        self.A_log = nn.Parameter(torch.log(torch.empty(num_heads).uniform_(1, 16)))
        self.dt_bias = nn.Parameter(torch.zeros(key_dim))
        self.g_proj = nn.Sequential(nn.Linear(hidden_size, self.head_v_dim, bias=False),
                                    nn.Linear(self.head_v_dim, value_dim, bias=True))
        self.o_norm = SigmoidGatedRMSNorm(self.head_v_dim, eps=norm_eps)
        self.o_proj = nn.Linear(value_dim, hidden_size, bias=False)

    def forward(self, x: torch.Tensor, initial_state: torch.Tensor | None = None):
        T = x.shape[1]

        def short_conv(conv: nn.Conv1d, y: torch.Tensor) -> torch.Tensor:
            return F.silu(conv(y.transpose(1, 2))[..., :T].transpose(1, 2))

        q = short_conv(self.q_conv1d, self.q_proj(x))
        k = short_conv(self.k_conv1d, self.k_proj(x))
        v = short_conv(self.v_conv1d, self.v_proj(x))
        g = self.f_proj(x)
        beta = self.b_proj(x).sigmoid()
        q, k, g = (t.unflatten(-1, (self.num_heads, self.head_k_dim)) for t in (q, k, g))
        v = v.unflatten(-1, (self.num_heads, self.head_v_dim))
        q, k = (t * torch.rsqrt(t.pow(2).sum(-1, keepdim=True) + 1e-6) for t in (q, k))
        g = -self.A_log.exp()[:, None] * F.softplus(g + self.dt_bias.view(self.num_heads, -1))
        o, state = load_fla_naive("kda").naive_recurrent_kda(q, k, v, g, beta, initial_state=initial_state,
                                                            output_final_state=True)
        o = self.o_norm(o, self.g_proj(x).unflatten(-1, (self.num_heads, self.head_v_dim)))
        return self.o_proj(o.flatten(2)), state


def fla_layer(mixer: KimiDeltaAttention) -> FlaKimiDeltaAttention:
    """fla's layer of `mixer`'s sizes, holding `mixer`'s weights."""
    layer = fla_layer_like(mixer)
    load_ours_into_theirs(layer, mixer, FLA)
    return layer


def fla_layer_like(mixer: KimiDeltaAttention) -> FlaKimiDeltaAttention:
    """A new fla layer of `mixer`'s sizes, initialised as fla's layer initialises itself."""
    return FlaKimiDeltaAttention(mixer.d_model, mixer.head_dim, mixer.n_heads, mixer.head_v_dim / mixer.head_dim,
                                 mixer.conv_size, mixer.o_norm.eps)


def fla_model_initialised(mixer: KimiDeltaAttention, initializer_range: float = 0.02) -> FlaKimiDeltaAttention:
    """A new fla layer re-initialised as fla's KDA model initialises its layers: a transcription
    of KDAPreTrainedModel._init_weights (fla/models/kda/modeling_kda.py, stored version commit
    07e2bd32; not installed with fla-core) for one layer, safe_gate off: A_log = log U(1, 16) again;
    dt_bias = softplus^-1(dt), dt log-uniform in [1e-3, 0.1] (at least 1e-4); nn.Linear and
    nn.Conv1d weights N(0, initializer_range), their biases 0; the norm reset (weight 1)."""
    layer = fla_layer_like(mixer)
    with torch.no_grad():
        layer.A_log.copy_(torch.empty_like(layer.A_log).uniform_(1, 16).log())
        log_dt = torch.rand_like(layer.dt_bias) * (math.log(0.1) - math.log(0.001)) + math.log(0.001)
        dt = log_dt.exp().clamp(min=1e-4)
        layer.dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
        for module in layer.modules():
            if isinstance(module, (nn.Linear, nn.Conv1d)):
                nn.init.normal_(module.weight, std=initializer_range)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)
        nn.init.ones_(layer.o_norm.weight)
    return layer
