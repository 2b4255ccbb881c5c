"""transformers' Mamba-2 mixer as the counterpart of layerzoo's: the parameter mapping (MAMBA2), a
layer of matching size holding the same weights, its pure-PyTorch path, and its cache read as a
Mamba2State.

The counterpart is `transformers.models.mamba2.modeling_mamba2.Mamba2Mixer` (transformers 5.x). Its
kernels are module-level functions (`causal_conv1d_fn`, `causal_conv1d_update`,
`mamba2_selective_state_update`, `mamba2_chunk_scan`, `mamba2_split_conv1d_scan_combined`), each
wrapped by `use_kernel_func_from_hub_with_fallback`, which binds mamba_ssm's or causal_conv1d's CUDA
kernel at import when that package imports and the PyTorch body below the decorator otherwise.
`torch_path()` rebinds the five names in the modeling module to those PyTorch bodies (the wrappers'
`__wrapped__`), so the counterpart runs on CPU whatever is installed; the fused training-mode
shortcut's PyTorch body returns None, which makes `forward` take the step-by-step path.
"""

from __future__ import annotations

import contextlib
import inspect

from torch import nn

from layerzoo.mixers import Mamba2
from layerzoo.mixers.mamba2 import Mamba2State

from .hf_torch_path import pure_pytorch
from .parity_mapping import Mapped, Mapping, load_ours_into_theirs

# layerzoo's parameters taken from transformers' (tests/helpers/parity_mapping.py). The names are
# mamba_ssm's on both sides; the only layout difference is the depthwise convolution's weight:
# layerzoo's ShortConvolution holds (channels, width), transformers' nn.Conv1d (channels, 1, width).
# Everything else has one shape on both sides: in_proj (d_inner + conv_dim + n_heads, d_model) with
# rows z | x | B | C | dt, conv1d over conv_dim = d_inner + 2 n_groups d_state channels (x | B | C),
# A_log, dt_bias, D (n_heads,), norm.weight (d_inner,), out_proj (d_model, d_inner).
MAMBA2: Mapping = {name: Mapped((name,)) for name in (
    "in_proj.weight", "conv1d.bias", "A_log", "dt_bias", "D", "norm.weight", "out_proj.weight")} | {
    "conv1d.weight": Mapped(("conv1d.weight",), lambda w: w[:, 0], note="conv1d.weight[:, 0]"),
}

KERNEL_NAMES = ("causal_conv1d_fn", "causal_conv1d_update", "mamba2_selective_state_update", "mamba2_chunk_scan",
                "mamba2_split_conv1d_scan_combined")


def modeling():
    from transformers.models.mamba2 import modeling_mamba2

    return modeling_mamba2


def unsupported_layout() -> str | None:
    """Why this transformers' Mamba-2 is not the layout these helpers know (None when it is): the
    five kernel functions with PyTorch bodies, the grouped gated norm, linear-attention cache layers.
    Earlier 5.x releases chose kernels in the mixer's constructor and normalised over all d_inner
    channels whatever n_groups; their parity is not claimed."""
    from transformers import cache_utils

    module = modeling()
    missing = [name for name in KERNEL_NAMES if not hasattr(getattr(module, name, None), "__wrapped__")]
    if missing:
        return f"transformers' modeling_mamba2 has no PyTorch-bodied {', '.join(missing)}"
    if "group_size" not in inspect.signature(module.MambaRMSNormGated).parameters:
        return "transformers' MambaRMSNormGated is not grouped"
    if not hasattr(cache_utils, "LinearAttentionLayer"):
        return "transformers' cache_utils has no LinearAttentionLayer"
    return None


def torch_path() -> contextlib.AbstractContextManager:
    """Within it, transformers' Mamba2Mixer runs its PyTorch functions, never a CUDA kernel."""
    return pure_pytorch(modeling(), KERNEL_NAMES)


def config_of(mixer: Mamba2, chunk_size: int | None = None, n_layers: int = 1):
    """The Mamba2Config of a layer the size of `mixer` (the chunk length may differ: it changes
    only the order of the sums)."""
    from transformers import Mamba2Config

    return Mamba2Config(
        hidden_size=mixer.d_model, num_heads=mixer.n_heads, head_dim=mixer.head_dim, state_size=mixer.d_state,
        expand=mixer.options.expand, n_groups=mixer.n_groups, conv_kernel=mixer.conv_size,
        chunk_size=chunk_size or mixer.chunk_size, layer_norm_epsilon=mixer.options.norm_eps,
        time_step_min=mixer.dt_min, time_step_max=mixer.dt_max, use_bias=False, use_conv_bias=True,
        num_hidden_layers=n_layers, vocab_size=8, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    )


def counterpart(mixer: Mamba2, chunk_size: int | None = None) -> nn.Module:
    """transformers' Mamba2Mixer of `mixer`'s size holding `mixer`'s weights (copied through MAMBA2)."""
    hf = modeling().Mamba2Mixer(config_of(mixer, chunk_size), layer_idx=0)
    load_ours_into_theirs(hf, mixer, MAMBA2)
    return hf


def new_cache():
    """An empty transformers cache of one linear-attention layer (what Mamba2Model makes per layer)."""
    from transformers.cache_utils import Cache, LinearAttentionLayer

    return Cache(layers=[LinearAttentionLayer()])


def state_of(cache) -> Mamba2State:
    """transformers' cache of layer 0 in layerzoo's layout. Its conv state holds the last `width`
    inputs (B, channels, width), whose oldest no step reads; layerzoo's the last width - 1
    (B, width - 1, channels). Its recurrent state is (B, heads, head_dim, d_state); layerzoo's
    (B, heads, d_state, head_dim)."""
    conv = cache.get_conv_state(0)
    return Mamba2State(conv[..., 1:].transpose(1, 2), cache.get_recurrent_state(0).transpose(-1, -2))
