"""The mLSTM token mixer, laid out as the xLSTM-7B mLSTM layer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from ..blocks.meta import reset_unless_meta
from ..blocks.projections import Linear
from ..errors import OptionError
from ..kernels.common.dtypes import compute_dtype, upcast
from ..kernels.mlstm import BACKENDS, MLSTMState, mlstm
from ..options import option
from ..registry import register_mixer
from .base import Mixer, MixerOptions
from .from_attention import TeacherAttention

if TYPE_CHECKING:
    from .attention import CausalAttention


@dataclass(frozen=True)
class MLSTMOptions(MixerOptions):
    n_heads: int = option(4, min=1, help="heads; the q/k and v widths must divide by it")
    qk_dim_factor: float = option(0.5, above=0.0, help="q and k width: qk_dim_factor * d_model, split over the heads")
    v_dim_factor: float = option(1.0, above=0.0, help="v and output-gate width: v_dim_factor * d_model, split over the heads")
    gate_soft_cap: float | None = option(15.0, above=0.0, help="soft cap of the input and forget gate pre-activations; null: uncapped")
    chunk_size: int = option(64, min=1, help="chunk length of the chunkwise kernel")
    backend: str = option("auto", choices=("auto", *BACKENDS), help="the mlstm kernel backend")
    norm_eps: float = option(1e-6, above=0.0, help="epsilon of the per-head output LayerNorm")

    def check(self, d_model: int) -> None:
        for key, factor in (("qk_dim_factor", self.qk_dim_factor), ("v_dim_factor", self.v_dim_factor)):
            width = factor * d_model
            if width < 1 or not math.isclose(width, round(width), rel_tol=1e-9):
                raise OptionError(key, f"{key} * d_model = {factor} * {d_model} = {width:g} must be a positive integer")
            if round(width) % self.n_heads:
                raise OptionError("n_heads", f"{key} * d_model = {round(width)} is not divisible by n_heads {self.n_heads}")


@register_mixer("mlstm", test_options={"n_heads": 2, "chunk_size": 4})
class MLSTM(Mixer):
    """mLSTM (xLSTM matrix memory) with exponential input and sigmoid forget gates, as in xLSTM-7B.

    Shapes: x (B, T, d_model) -> (B, T, d_model). Per head, q and k have
    Dk = qk_dim_factor * d_model / n_heads channels, v and the output gate Dv = v_dim_factor *
    d_model / n_heads. The input and forget gate pre-activations (one per head, with bias) are
    soft-capped; h is normalised per head (LayerNorm, weight only), times sigmoid(output gate),
    then projected back to d_model.

    The streaming state is an MLSTMState (C, n, m) in fp32, constant in size: pieces of several
    tokens run the chunkwise kernel from the carried state, single tokens (with backend "auto")
    one step of the reference loop. Init follows xLSTM-7B: gate weights zero, forget-gate bias
    linspace(3, 6) over heads (slow to forget), input-gate bias -10 (small writes until trained).

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers mlstm`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: qk_dim_factor * d_model or v_dim_factor * d_model is not a positive integer,
            or does not divide by n_heads.
    """

    packs_sequences = True
    layer_type = "linear_attention"
    Options = MLSTMOptions

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        config = self.options
        qk_width, v_width = round(config.qk_dim_factor * d_model), round(config.v_dim_factor * d_model)
        self.n_heads = n_heads = config.n_heads
        self.key_dim = qk_width // n_heads
        self.value_dim = v_width // n_heads
        self.gate_soft_cap = config.gate_soft_cap
        self.chunk_size = config.chunk_size
        self.backend = config.backend
        self.norm_eps = config.norm_eps
        self.widths = [qk_width, qk_width, v_width, v_width]  # q, k, v, output gate
        self.in_proj = Linear(d_model, sum(self.widths), bias=False)
        self.gate_proj = Linear(d_model, 2 * n_heads)  # input, forget gate pre-activations
        self.norm_weight = nn.Parameter(torch.empty(n_heads, self.value_dim))
        self.out_proj = Linear(v_width, d_model, bias=False)
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """The layer's own init (after the projections' nn.Linear defaults): unit norm, xLSTM-7B's gates."""
        with torch.no_grad():
            self.norm_weight.fill_(1.0)
            self.gate_proj.weight.zero_()
            self.gate_proj.bias[:self.n_heads] = -10.0
            self.gate_proj.bias[self.n_heads:] = torch.linspace(3.0, 6.0, self.n_heads)

    @classmethod
    def options_from_attention(cls, teacher: TeacherAttention) -> dict[str, Any]:
        """q, k, v of the teacher's H heads of width D: qk and v widths H D."""
        factor = teacher.width / teacher.d_model
        return {"n_heads": teacher.n_heads, "qk_dim_factor": factor, "v_dim_factor": factor}

    def init_from_attention(self, attention: CausalAttention) -> None:
        """q, k, v into in_proj, o into out_proj; the output gate's rows and the input and forget
        gates keep the layer's own init (slow to forget, small writes)."""
        q, k, v, o = attention.head_projections()
        q_rows, k_rows, v_rows, _ = self.in_proj.weight.split(self.widths)
        for rows, source in ((q_rows, q), (k_rows, k), (v_rows, v)):
            rows.copy_(source)
        self.out_proj.weight.copy_(o)

    def mix(self, x: torch.Tensor, state: MLSTMState | None, cu_seqlens: torch.Tensor | None):
        q, k, v, output_gate = self.in_proj(x).split(self.widths, dim=-1)
        q = q.unflatten(-1, (self.n_heads, self.key_dim))
        k = k.unflatten(-1, (self.n_heads, self.key_dim))
        v = v.unflatten(-1, (self.n_heads, self.value_dim))
        input_gate, forget_gate = self.gate_preactivations(x)
        h, new_state = mlstm(
            q, k, v, input_gate, forget_gate,
            initial_state=state,
            output_final_state=True,
            chunk_size=self.chunk_size,
            backend=self.backend,
            cu_seqlens=cu_seqlens,
        )
        h = F.layer_norm(upcast(h), (self.value_dim,), eps=self.norm_eps) * upcast(self.norm_weight)
        h = h.flatten(-2) * torch.sigmoid(upcast(output_gate))
        return self.out_proj(h.to(x.dtype)), new_state

    def gate_preactivations(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, d_model) -> soft-capped input and forget gate pre-activations, (B, T, n_heads) each.

        In fp32 whatever x's dtype: the input gate is exp(i), which would turn bf16's rounding of i
        (steps of 0.0625 near 10) into errors of up to 3% in every write.
        """
        gates = F.linear(upcast(x), upcast(self.gate_proj.weight), upcast(self.gate_proj.bias))
        if self.gate_soft_cap is not None:
            gates = self.gate_soft_cap * torch.tanh(gates / self.gate_soft_cap)
        return gates.chunk(2, dim=-1)

    def init_state(self, batch_size: int) -> MLSTMState:
        """The empty (all-zero) MLSTMState for `batch_size` sequences.

        Args:
            batch_size: sequences B the state holds.

        Returns:
            MLSTMState with C (B, n_heads, Dk, Dv), n (B, n_heads, Dk), m (B, n_heads), fp32
                (fp64 for fp64 weights), on the weights' device.
        """
        weight = self.in_proj.weight
        return MLSTMState.empty(
            batch_size, self.n_heads, self.key_dim, self.value_dim, compute_dtype(weight.dtype), weight.device
        )

    def state_size(self, seq_len: int) -> int:
        """Elements per sequence, whatever seq_len: C, n and m of every head.

        Args:
            seq_len: tokens seen (the size does not depend on it).

        Returns:
            n_heads * (Dk * Dv + Dk + 1).
        """
        return self.n_heads * (self.key_dim * self.value_dim + self.key_dim + 1)
