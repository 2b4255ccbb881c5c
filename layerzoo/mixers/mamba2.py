"""Mamba-2 (Dao, Gu 2024): a selective state-space layer as a token mixer, on the SSD kernel.

One input projection gives z (the output gate), x (the values), B and C (the state's input and
output maps, shared by the heads of a group) and dt (a step per head). A short causal
convolution with SiLU runs over x, B and C together; dt = softplus(dt + dt_bias); A = -exp(A_log)
per head. Per head the state h (d_state, head_dim) follows

    h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T;  y_t = h_t^T C_t + D x_t

which is `layerzoo.kernels.ssd` with g = dt A, k = dt B, q = C, v = x and scale 1 (Mamba's own
convention and fla's Mamba-2 mapping onto simple_gla: C reads the state unscaled; ssd's default
K^-0.5 is linear attention's). Then the gated norm RMSNorm(y * SiLU(z)), per group as Mamba's
`norm_before_gate=False`, and the output projection. Parameter names and layouts follow
mamba_ssm's Mamba2 (in_proj order z, x, B, C, dt; conv over x, B, C with a bias), so its
checkpoints map over (conv weights squeezed to (channels, width)).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from ..blocks.meta import reset_unless_meta
from ..blocks.norms import RMSNorm
from ..blocks.projections import Linear
from ..blocks.short_conv import ShortConvolution
from ..errors import OptionError
from ..kernels.common.dtypes import upcast
from ..kernels.ssd import BACKENDS, ssd
from ..options import option
from ..registry import register_mixer
from .base import Mixer, MixerOptions
from .decay_gates import init_decay_rate, init_time_step_bias
from .from_attention import TeacherAttention, identity, slow_decay_bias

if TYPE_CHECKING:
    from .attention import CausalAttention


@dataclass
class Mamba2State:
    """Streaming state of Mamba-2; its size does not grow with the sequence.

    Attributes:
        conv: (B, conv_size - 1, d_inner + 2 * n_groups * d_state), the last inputs of the short
            convolution over x, B, C (before it), oldest first, in the model's dtype.
        ssm: (B, n_heads, d_state, head_dim), the state h, fp32 whatever the model's dtype.
    """

    conv: torch.Tensor
    ssm: torch.Tensor


@dataclass(frozen=True)
class Mamba2Options(MixerOptions):
    head_dim: int = option(64, min=1, help="channels per head; the heads are expand * d_model // head_dim")
    d_state: int = option(128, min=1, help="width of B and C: the state is (d_state, head_dim) per head")
    expand: int = option(2, min=1, help="inner width d_inner = expand * d_model")
    n_groups: int = option(1, min=1, help="groups of heads sharing one B and C (and one norm group)")
    conv_size: int = option(4, min=1, help="width of the short convolution over x, B and C")
    dt_min: float = option(1e-3, above=0.0, help="lower end of the initial time step's log-uniform range")
    dt_max: float = option(0.1, above=0.0, help="upper end of the initial time step's log-uniform range")
    norm_eps: float = option(1e-5, above=0.0, help="epsilon of the gated RMSNorm")
    chunk_size: int = option(64, min=1, help="chunk length of the chunkwise kernel")
    backend: str = option("auto", choices=("auto", *BACKENDS), help="the ssd kernel backend")

    def check(self, d_model: int) -> None:
        if (self.expand * d_model) % self.head_dim:
            raise OptionError("head_dim", f"d_inner = expand * d_model = {self.expand * d_model} is not divisible by "
                                          f"head_dim {self.head_dim}")
        n_heads = self.expand * d_model // self.head_dim
        if n_heads % self.n_groups:
            raise OptionError("n_groups", f"the {n_heads} heads (expand * d_model // head_dim) are not divisible "
                                          f"by n_groups {self.n_groups}")
        if self.dt_min > self.dt_max:
            raise OptionError("dt_min", f"need 0 < dt_min <= dt_max, got dt_min {self.dt_min}, dt_max {self.dt_max}")


@register_mixer("mamba2", test_options={"head_dim": 16, "d_state": 8, "chunk_size": 4})
class Mamba2(Mixer):
    """Mamba-2: a selective state space per head with a scalar decay, constant state, chunkwise-parallel.

    Shapes: x (B, T, d_model) -> (B, T, d_model). d_inner = expand * d_model channels make
    d_inner // head_dim heads; B and C (d_state wide) are shared by the heads of each of
    n_groups groups. The defaults are Mamba-2's. `backend` and `chunk_size` go to `ssd`; its
    "auto" runs single-token steps (decoding) as one recurrent step. The streaming state is a
    Mamba2State (see `init_state`).

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers mamba2`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: expand * d_model does not divide by head_dim, the heads do not divide by
            n_groups, or dt_min > dt_max.
    """

    packs_sequences = True
    layer_type = "linear_attention"
    Options = Mamba2Options

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        config = self.options
        self.d_inner = config.expand * d_model
        self.head_dim, self.d_state, self.n_groups = config.head_dim, config.d_state, config.n_groups
        self.n_heads = self.d_inner // config.head_dim
        self.conv_size, self.dt_min, self.dt_max = config.conv_size, config.dt_min, config.dt_max
        self.chunk_size, self.backend = config.chunk_size, config.backend
        self.conv_dim = self.d_inner + 2 * self.n_groups * self.d_state
        self.in_proj = Linear(d_model, self.d_inner + self.conv_dim + self.n_heads, bias=False)
        self.conv1d = ShortConvolution(self.conv_dim, self.conv_size, bias=True)
        self.A_log = nn.Parameter(torch.empty(self.n_heads))
        self.dt_bias = nn.Parameter(torch.empty(self.n_heads))
        self.D = nn.Parameter(torch.empty(self.n_heads))
        self.norm = RMSNorm(self.d_inner, eps=config.norm_eps, groups=self.n_groups)
        self.out_proj = Linear(self.d_inner, d_model, bias=False)
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """Mamba-2's init (decay_gates.py): A ~ U(1, 16); dt log-uniform in [dt_min, dt_max]; D = 1."""
        init_decay_rate(self.A_log, 1, 16)
        init_time_step_bias(self.dt_bias, self.dt_min, self.dt_max)
        nn.init.ones_(self.D)

    @classmethod
    def options_from_attention(cls, teacher: TeacherAttention) -> dict[str, Any]:
        """x of the teacher's H heads of width D, B and C one group per head: d_inner = H D, an
        integer multiple of d_model."""
        if teacher.width % teacher.d_model:
            raise OptionError("expand", f"mamba2's inner width is expand * d_model, an integer multiple of d_model "
                                        f"{teacher.d_model}; the teacher's heads are {teacher.n_heads} x "
                                        f"{teacher.head_dim} = {teacher.width} wide")
        return {"head_dim": teacher.head_dim, "d_state": teacher.head_dim, "n_groups": teacher.n_heads,
                "expand": teacher.width // teacher.d_model}

    def init_from_attention(self, attention: CausalAttention) -> None:
        """Mamba-in-the-Llama's mapping: x <- v, B <- k, C <- q, out <- o; the convolution the
        identity; dt input-independent and slow (A = 1); z and D their own."""
        q, k, v, o = attention.head_projections()
        _, x, B, C, dt = self.in_proj.weight.split([self.d_inner] * 4 + [self.n_heads])
        x.copy_(v)
        B.copy_(k)
        C.copy_(q)
        dt.zero_()
        self.out_proj.weight.copy_(o)
        identity(self.conv1d)
        self.A_log.zero_()
        self.dt_bias.copy_(slow_decay_bias(self.n_heads))

    def mix(self, x: torch.Tensor, state: Mamba2State | None, cu_seqlens: torch.Tensor | None):
        streams = x.shape[0] if cu_seqlens is None else len(cu_seqlens) - 1
        state = self.init_state(streams) if state is None else state
        z, xbc, dt = self.in_proj(x).split([self.d_inner, self.conv_dim, self.n_heads], dim=-1)
        xbc, conv = self.conv1d(xbc, state.conv, cu_seqlens=cu_seqlens)
        values, B, C = xbc.split([self.d_inner, self.n_groups * self.d_state, self.n_groups * self.d_state], dim=-1)
        values = values.unflatten(-1, (self.n_heads, self.head_dim))
        B, C = (self._per_head(t) for t in (B, C))
        # Gates in fp32: g sums over thousands of steps inside the kernel.
        dt = F.softplus(upcast(dt) + upcast(self.dt_bias))
        g = -upcast(self.A_log).exp() * dt
        y, ssm = ssd(
            C, (B * dt[..., None]).to(B.dtype), values, g,
            scale=1.0,
            initial_state=state.ssm,
            output_final_state=True,
            chunk_size=self.chunk_size,
            backend=self.backend,
            cu_seqlens=cu_seqlens,
        )
        y = y + values * self.D.to(values.dtype)[:, None]
        y = self.norm(y.flatten(2) * F.silu(z))
        return self.out_proj(y), Mamba2State(conv, ssm)

    def _per_head(self, t: torch.Tensor) -> torch.Tensor:
        """(B, T, n_groups * d_state) -> (B, T, n_heads, d_state): each group's map for its heads."""
        groups = t.unflatten(-1, (self.n_groups, self.d_state))
        return groups.repeat_interleave(self.n_heads // self.n_groups, dim=2)

    def init_state(self, batch_size: int) -> Mamba2State:
        """The empty (all-zero) Mamba2State for `batch_size` sequences.

        Args:
            batch_size: sequences B the state holds.

        Returns:
            Mamba2State with conv (B, conv_size - 1, d_inner + 2 * n_groups * d_state) in the
                weights' dtype and ssm (B, n_heads, d_state, head_dim) in fp32.
        """
        conv = self.conv1d.init_state(batch_size)
        ssm = self.A_log.new_zeros(batch_size, self.n_heads, self.d_state, self.head_dim, dtype=torch.float32)
        return Mamba2State(conv, ssm)

    def state_size(self, seq_len: int) -> int:
        """Elements per sequence, whatever seq_len: the convolution's cache and the state h.

        Args:
            seq_len: tokens seen (the size does not depend on it).

        Returns:
            (conv_size - 1) * (d_inner + 2 * n_groups * d_state) + n_heads * d_state * head_dim.
        """
        return (self.conv_size - 1) * self.conv_dim + self.n_heads * self.d_state * self.head_dim
