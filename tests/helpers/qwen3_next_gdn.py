"""Qwen3-Next's Gated DeltaNet layer (transformers' Qwen3NextGatedDeltaNet) as the counterpart of
layerzoo's GatedDeltaNet: a tiny config of matching sizes, its pure-PyTorch path, its own init,
and the mapping of layerzoo's weights onto its fused ones (docs/parity.md has the same table).

The mapping, for H heads of key width K and value width V (transformers' num_k_heads =
num_v_heads = H, head_k_dim = K, head_v_dim = V) and convolutions of width W:

- in_proj_qkvz.weight (H (2K + 2V), d): head by head, [q_h; k_h; v_h; z_h]: the rows of
  q_proj, k_proj, v_proj and g_proj (the output gate z) that belong to head h;
- in_proj_ba.weight (2H, d): head by head, [b_h; a_h]: b_proj then a_proj, a row each;
- conv1d.weight (2HK + HV, 1, W): q_conv1d, k_conv1d, v_conv1d weights one after another;
- A_log, dt_bias (H): the same; norm.weight (V): o_norm.weight; out_proj.weight: o_proj.weight.
"""

from __future__ import annotations

import contextlib
import functools

import torch
from transformers.models.qwen3_next import modeling_qwen3_next as qwen
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

from layerzoo.mixers import GatedDeltaNet

from .hf_torch_path import pure_pytorch

# layerzoo's parameter -> where Qwen3NextGatedDeltaNet holds it (the module docstring has the layouts).
QWEN3_NEXT_NAMES = {
    "q_proj.weight": "in_proj_qkvz.weight",
    "k_proj.weight": "in_proj_qkvz.weight",
    "v_proj.weight": "in_proj_qkvz.weight",
    "g_proj.weight": "in_proj_qkvz.weight",
    "b_proj.weight": "in_proj_ba.weight",
    "a_proj.weight": "in_proj_ba.weight",
    "q_conv1d.weight": "conv1d.weight",
    "k_conv1d.weight": "conv1d.weight",
    "v_conv1d.weight": "conv1d.weight",
    "A_log": "A_log",
    "dt_bias": "dt_bias",
    "o_norm.weight": "norm.weight",
    "o_proj.weight": "out_proj.weight",
}

# The module attributes Qwen3NextGatedDeltaNet.forward calls by name. transformers binds each when
# the module is imported (use_kernel_func_from_hub_with_fallback): with fla installed the chunk and
# recurrent rules are fla's Triton kernels, which fail on CPU. The wrapper keeps the pure-PyTorch
# function as __wrapped__ (functools.wraps); torch_path() puts those back in the module.
TORCH_PATH = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule", "causal_conv1d_fn",
              "causal_conv1d_update")


def torch_path() -> contextlib.AbstractContextManager:
    """Qwen3-Next's Gated DeltaNet on its PyTorch functions (fla's kernels and causal-conv1d's
    bypassed) while inside."""
    return pure_pytorch(qwen, TORCH_PATH)


def qwen3_next_config(mixer: GatedDeltaNet) -> Qwen3NextConfig:
    """A one-layer Qwen3-Next config whose linear-attention layer has `mixer`'s sizes."""
    return Qwen3NextConfig(
        vocab_size=16, hidden_size=mixer.d_model, intermediate_size=8, moe_intermediate_size=8,
        shared_expert_intermediate_size=8, num_experts=2, num_experts_per_tok=1, num_hidden_layers=1,
        num_attention_heads=1, num_key_value_heads=1, head_dim=8, layer_types=["linear_attention"],
        linear_num_key_heads=mixer.n_heads, linear_num_value_heads=mixer.n_heads, linear_key_head_dim=mixer.head_dim,
        linear_value_head_dim=mixer.head_v_dim, linear_conv_kernel_dim=mixer.conv_size,
        rms_norm_eps=mixer.o_norm.eps, hidden_act="silu",
    )


def qwen3_next_layer(mixer: GatedDeltaNet) -> qwen.Qwen3NextGatedDeltaNet:
    """Qwen3-Next's layer of `mixer`'s sizes, holding `mixer`'s weights."""
    layer = qwen.Qwen3NextGatedDeltaNet(qwen3_next_config(mixer), layer_idx=0)
    state = to_qwen3_next({name: p.detach() for name, p in mixer.named_parameters()}, mixer)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            assert p.shape == state[name].shape, f"{name}: {tuple(state[name].shape)} into {tuple(p.shape)}"
            p.copy_(state[name])
    return layer


def to_qwen3_next(ours: dict[str, torch.Tensor], mixer: GatedDeltaNet) -> dict[str, torch.Tensor]:
    """layerzoo's GatedDeltaNet tensors (parameters or their gradients) by Qwen3-Next's names."""
    H, K, V = mixer.n_heads, mixer.head_dim, mixer.head_v_dim
    heads = [ours["q_proj.weight"].unflatten(0, (H, K)), ours["k_proj.weight"].unflatten(0, (H, K)),
             ours["v_proj.weight"].unflatten(0, (H, V)), ours["g_proj.weight"].unflatten(0, (H, V))]
    return {
        "in_proj_qkvz.weight": torch.cat(heads, dim=1).flatten(0, 1),
        "in_proj_ba.weight": torch.stack([ours["b_proj.weight"], ours["a_proj.weight"]], dim=1).flatten(0, 1),
        "conv1d.weight": torch.cat([ours[f"{p}_conv1d.weight"] for p in "qkv"])[:, None, :],
        "A_log": ours["A_log"], "dt_bias": ours["dt_bias"],
        "norm.weight": ours["o_norm.weight"], "out_proj.weight": ours["o_proj.weight"],
    }


def from_qwen3_next(theirs: dict[str, torch.Tensor], mixer: GatedDeltaNet) -> dict[str, torch.Tensor]:
    """Qwen3-Next's tensors by layerzoo's names: to_qwen3_next read backwards."""
    H, K, V = mixer.n_heads, mixer.head_dim, mixer.head_v_dim
    q, k, v, z = theirs["in_proj_qkvz.weight"].unflatten(0, (H, -1)).split([K, K, V, V], dim=1)
    b, a = theirs["in_proj_ba.weight"].unflatten(0, (H, 2)).unbind(1)
    q_conv, k_conv, v_conv = theirs["conv1d.weight"][:, 0].split([H * K, H * K, H * V])
    return {
        "q_proj.weight": q.flatten(0, 1), "k_proj.weight": k.flatten(0, 1), "v_proj.weight": v.flatten(0, 1),
        "g_proj.weight": z.flatten(0, 1), "b_proj.weight": b, "a_proj.weight": a,
        "q_conv1d.weight": q_conv, "k_conv1d.weight": k_conv, "v_conv1d.weight": v_conv,
        "A_log": theirs["A_log"], "dt_bias": theirs["dt_bias"],
        "o_norm.weight": theirs["norm.weight"], "o_proj.weight": theirs["out_proj.weight"],
    }


@functools.cache
def _init_model(d_model: int, n_heads: int, head_dim: int, head_v_dim: int,
                conv_size: int) -> qwen.Qwen3NextPreTrainedModel:
    mixer = GatedDeltaNet(d_model, n_heads=n_heads, head_dim=head_dim, expand_v=head_v_dim / head_dim,
                          conv_size=conv_size)
    return qwen.Qwen3NextModel(qwen3_next_config(mixer))


def qwen3_next_initialised(mixer: GatedDeltaNet) -> qwen.Qwen3NextGatedDeltaNet:
    """A new Qwen3-Next layer of `mixer`'s sizes initialised as transformers initialises one in a
    model: Qwen3NextPreTrainedModel._init_weights run on each of its modules."""
    model = _init_model(mixer.d_model, mixer.n_heads, mixer.head_dim, mixer.head_v_dim, mixer.conv_size)
    layer = qwen.Qwen3NextGatedDeltaNet(model.config, layer_idx=0)
    layer.apply(model._init_weights)
    return layer
