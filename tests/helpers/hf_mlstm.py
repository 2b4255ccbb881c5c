"""transformers' xLSTM mLSTM layer (xLSTMLayer, the xLSTM-7B layout) as the counterpart of
layerzoo's `mlstm`, with the mapping of its parameters onto ours.

Pure PyTorch: without the `xlstm` package transformers defines its own xLSTMLayer over native
kernels (chunkwise "chunkwise--native_autograd" for whole chunks, then the step loop
"native_sequence__native" for the rest, in "inference" mode, which also returns the final state);
the config names those kernels explicitly and runs them in fp32 (autocast_kernel_dtype is
bfloat16 by default). The layer is taken from a one-block xLSTMModel, so it is also what
xLSTMPreTrainedModel._init_weights leaves.
"""

from __future__ import annotations

import torch
from torch import nn

from transformers import xLSTMConfig
from transformers.models.xlstm.modeling_xlstm import xLSTMModel

from .parity_mapping import Mapped, Mapping


def xlstm_config(d_model: int, n_heads: int, qk_dim_factor: float = 0.5, v_dim_factor: float = 1.0,
                 gate_soft_cap: float | None = 15.0, chunk_size: int = 64, weight_mode: str = "single",
                 norm_eps: float = 1e-6, dtype: torch.dtype = torch.float32) -> xLSTMConfig:
    """gate_soft_cap None (uncapped) is set after construction: the config's field is typed float
    and refuses None, while the layer's soft_cap takes None as no cap.

    dtype float64: the kernels' state in fp64 and the norms' reductions in the input dtype (they
    force fp32 by default), so the whole layer runs in fp64. The config's strict fields accept
    only fp32 / bf16 / fp16 state dtypes, so that one is set past their validation."""
    config = xLSTMConfig(
        hidden_size=d_model, num_heads=n_heads, num_hidden_layers=1, vocab_size=32, qk_dim_factor=qk_dim_factor,
        v_dim_factor=v_dim_factor, gate_soft_cap=15.0, chunk_size=chunk_size, weight_mode=weight_mode,
        norm_eps=norm_eps, eps=1e-6, use_bias=False, mode="inference", return_last_states=True,
        chunkwise_kernel="chunkwise--native_autograd", sequence_kernel="native_sequence__native", step_kernel="native",
        autocast_kernel_dtype="float32", inference_state_dtype="float32",
    )
    object.__setattr__(config, "gate_soft_cap", gate_soft_cap)
    if dtype == torch.float64:
        config.norm_reduction_force_float32 = False
        object.__setattr__(config, "inference_state_dtype", "float64")
    return config


def xlstm_layer(config: xLSTMConfig, seed: int = 0, dtype: torch.dtype = torch.float32) -> nn.Module:
    """The mLSTM layer of a one-block xLSTMModel built (and initialised) from `seed`.

    With weight_mode "fused" the model cannot be built: _init_weights subtracts a (2H,) tensor
    from the (H,) input-gate bias (a RuntimeError in transformers 5.24), so that layer is built
    alone, with nn.Linear's init (the parity tests overwrite it anyway)."""
    torch.manual_seed(seed)
    if config.weight_mode == "fused":
        single = xlstm_config(config.hidden_size, config.num_heads, chunk_size=config.chunk_size)
        return type(xLSTMModel(single).blocks[0].mlstm_layer)(config).to(dtype)
    return xLSTMModel(config).blocks[0].mlstm_layer.to(dtype)


def run(layer: nn.Module, x: torch.Tensor, initial=None):
    """-> (y, (C, n, m)): C (B, H, Dk, Dv), n (B, H, Dk), m (B, H) as layerzoo's MLSTMState lays
    them out, and so is `initial` (None: theirs starts from zeros, as ours)."""
    if initial is not None:
        C0, n0, m0 = initial
        initial = (C0, n0, m0[..., None])
    y, (C, n, m) = layer(x, initial)
    return y, (C, n, m.squeeze(-1))


# layerzoo's in_proj is xLSTM's fused qkv_opreact (q, k, v, output gate), its gate_proj the fused
# ifgate_preact (input gate then forget gate, with bias): with weight_mode "fused" the names are
# all that differ; with "single" (the default, and xLSTM-7B's) our fused weights are theirs
# concatenated in that order. The per-head norm weight is (H, Dv) here, (H * Dv,) there.
SINGLE: Mapping = {
    "in_proj.weight": Mapped(("q.weight", "k.weight", "v.weight", "ogate_preact.weight"),
                             note="cat(q, k, v, ogate_preact)"),
    "gate_proj.weight": Mapped(("igate_preact.weight", "fgate_preact.weight"), note="cat(igate_preact, fgate_preact)"),
    "gate_proj.bias": Mapped(("igate_preact.bias", "fgate_preact.bias"), note="cat(igate_preact, fgate_preact)"),
    "norm_weight": Mapped(("multihead_norm.weight",), note="multihead_norm.weight.view(H, Dv)"),
    "out_proj.weight": Mapped(("out_proj.weight",)),
}

FUSED: Mapping = {
    "in_proj.weight": Mapped(("qkv_opreact.weight",)),
    "gate_proj.weight": Mapped(("ifgate_preact.weight",)),
    "gate_proj.bias": Mapped(("ifgate_preact.bias",)),
    "norm_weight": Mapped(("multihead_norm.weight",)),
    "out_proj.weight": Mapped(("out_proj.weight",)),
}

MAPPINGS = {"single": SINGLE, "fused": FUSED}
