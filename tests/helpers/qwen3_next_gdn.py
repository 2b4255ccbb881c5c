"""Qwen3-Next's Gated DeltaNet layer (transformers' Qwen3NextGatedDeltaNet) as the counterpart of
layerzoo's GatedDeltaNet: a tiny config of matching sizes, its pure-PyTorch path, its own init,
and the mapping of its fused weights onto layerzoo's (tests/helpers/parity_mapping.py;
docs/parity.md has the same table).

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

from transformers.models.qwen3_next import modeling_qwen3_next as qwen
from transformers.models.qwen3_next.configuration_qwen3_next import Qwen3NextConfig

from layerzoo.mixers import GatedDeltaNet

from .hf_torch_path import pure_pytorch
from .parity_mapping import Mapped, Mapping, load_ours_into_theirs


def qwen3_next_mapping(mixer: GatedDeltaNet) -> Mapping:
    """layerzoo's parameters taken from Qwen3NextGatedDeltaNet's (the module docstring has the layouts)."""
    H, K, V = mixer.n_heads, mixer.head_dim, mixer.head_v_dim

    def qkvz(which: int):
        return lambda w: w.unflatten(0, (H, 2 * K + 2 * V)).split([K, K, V, V], dim=1)[which]

    def ba(which: int):
        return lambda w: w.unflatten(0, (H, 2))[:, which]

    def conv(which: int):
        return lambda w: w[:, 0].split([H * K, H * K, H * V])[which]

    per_head = "in_proj_qkvz.weight.unflatten(0, (H, 2K + 2V))"
    return {
        "q_proj.weight": Mapped(("in_proj_qkvz.weight",), qkvz(0), note=f"{per_head}[:, :K]"),
        "k_proj.weight": Mapped(("in_proj_qkvz.weight",), qkvz(1), note=f"{per_head}[:, K:2K]"),
        "v_proj.weight": Mapped(("in_proj_qkvz.weight",), qkvz(2), note=f"{per_head}[:, 2K:2K + V]"),
        "g_proj.weight": Mapped(("in_proj_qkvz.weight",), qkvz(3), note=f"{per_head}[:, 2K + V:] (z)"),
        "b_proj.weight": Mapped(("in_proj_ba.weight",), ba(0), note="in_proj_ba.weight[0::2]"),
        "a_proj.weight": Mapped(("in_proj_ba.weight",), ba(1), note="in_proj_ba.weight[1::2]"),
        "q_conv1d.weight": Mapped(("conv1d.weight",), conv(0), note="conv1d.weight[:HK, 0]"),
        "k_conv1d.weight": Mapped(("conv1d.weight",), conv(1), note="conv1d.weight[HK:2HK, 0]"),
        "v_conv1d.weight": Mapped(("conv1d.weight",), conv(2), note="conv1d.weight[2HK:, 0]"),
        "A_log": Mapped(("A_log",)),
        "dt_bias": Mapped(("dt_bias",)),
        "o_norm.weight": Mapped(("norm.weight",)),
        "o_proj.weight": Mapped(("out_proj.weight",)),
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
    load_ours_into_theirs(layer, mixer, qwen3_next_mapping(mixer))
    return layer


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
