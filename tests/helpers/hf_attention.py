"""transformers' attention layers as counterparts of layerzoo's `attention` and `swa`: Llama's
(full), Mistral's (the same layer with a sliding window), Qwen2's (q, k, v biases), Qwen3's
(qk-norm with a plain weight, a head_dim of its own) and Qwen3-Next's gated attention (an output
gate fused into q_proj, qk-norm storing weight - 1), with the mappings of their parameters onto ours.

All run eager attention (attn_implementation="eager": softmax in fp32 with an additive mask) and
build their masks and KV caches with transformers' own mask functions and DynamicCache, so the
window's meaning (keys t-window+1..t) and what a cache keeps (the last window-1 keys) are theirs.
Attention has no fla kernel to avoid: these paths are pure PyTorch on CPU already.
"""

from __future__ import annotations

import torch
from torch import nn

from transformers import LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config, Qwen3NextConfig
from transformers.cache_utils import DynamicCache
from transformers.masking_utils import create_causal_mask, create_sliding_window_causal_mask
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaModel, LlamaRotaryEmbedding
from transformers.models.mistral.modeling_mistral import MistralAttention, MistralRotaryEmbedding
from transformers.models.qwen2.modeling_qwen2 import Qwen2Attention, Qwen2RotaryEmbedding
from transformers.models.qwen3.modeling_qwen3 import Qwen3Attention, Qwen3RotaryEmbedding
from transformers.models.qwen3_next.modeling_qwen3_next import (
    Qwen3NextAttention, Qwen3NextModel, Qwen3NextRotaryEmbedding,
)

from .parity_mapping import Mapped, Mapping


def common(d_model: int, n_heads: int, n_kv_heads: int, theta: float, head_dim: int | None = None) -> dict:
    return dict(hidden_size=d_model, num_attention_heads=n_heads, num_key_value_heads=n_kv_heads,
                head_dim=head_dim or d_model // n_heads, num_hidden_layers=1, vocab_size=32,
                intermediate_size=2 * d_model, attn_implementation="eager")


def llama(d_model: int, n_heads: int, n_kv_heads: int, theta: float = 10000.0, window: int | None = None):
    """(attention layer, rotary embedding, config): Llama's for full attention, Mistral's (Llama's
    layer with `sliding_window`) for a window."""
    rope = default_rope(theta)
    if window is None:
        config = LlamaConfig(**common(d_model, n_heads, n_kv_heads, theta), rope_parameters=rope)
        return LlamaAttention(config, 0), LlamaRotaryEmbedding(config), config
    config = MistralConfig(**common(d_model, n_heads, n_kv_heads, theta), rope_parameters=rope, sliding_window=window)
    return MistralAttention(config, 0), MistralRotaryEmbedding(config), config


def qwen2(d_model: int, n_heads: int, n_kv_heads: int, theta: float = 10000.0):
    """(attention layer, rotary embedding, config) of Qwen2: Llama's with biases on q, k and v."""
    config = Qwen2Config(**common(d_model, n_heads, n_kv_heads, theta), rope_parameters=default_rope(theta))
    return Qwen2Attention(config, 0), Qwen2RotaryEmbedding(config), config


def qwen3(d_model: int, n_heads: int, n_kv_heads: int, head_dim: int, theta: float = 10000.0, eps: float = 1e-6):
    """(attention layer, rotary embedding, config) of Qwen3: Llama's with an RMSNorm (plain weight,
    epsilon rms_norm_eps) on each head's queries and keys before RoPE, and head_dim set apart from
    hidden_size."""
    config = Qwen3Config(**common(d_model, n_heads, n_kv_heads, theta, head_dim), rope_parameters=default_rope(theta),
                         rms_norm_eps=eps)
    return Qwen3Attention(config, 0), Qwen3RotaryEmbedding(config), config


def default_rope(theta: float) -> dict:
    return {"rope_type": "default", "rope_theta": theta}


def qwen3_next_config(d_model: int, n_heads: int, n_kv_heads: int, theta: float = 10000.0,
                      window: int | None = None, partial_rotary_factor: float = 1.0, **extra) -> Qwen3NextConfig:
    """Qwen3-Next rotates only partial_rotary_factor (0.25 by default) of each head; layerzoo all of
    it, so the parity runs at 1.0. `window`: a sliding-window mask, which Qwen3-Next does not
    have (its attention layers are full); the layer itself is the same."""
    rope = {"rope_type": "default", "rope_theta": theta, "partial_rotary_factor": partial_rotary_factor}
    config = Qwen3NextConfig(**common(d_model, n_heads, n_kv_heads, theta), rope_parameters=rope,
                             layer_types=["full_attention"], **extra)
    config.sliding_window = window
    return config


def qwen3_next(d_model: int, n_heads: int, n_kv_heads: int, theta: float = 10000.0, window: int | None = None):
    """(gated attention layer, rotary embedding, config) of Qwen3-Next."""
    config = qwen3_next_config(d_model, n_heads, n_kv_heads, theta, window)
    return Qwen3NextAttention(config, 0), Qwen3NextRotaryEmbedding(config), config


def run(layer: nn.Module, rotary: nn.Module, config, x: torch.Tensor):
    """Their layer on x (B, T, d) from an empty cache -> (y, keys, values): the cache's keys and
    values (B, kept, n_kv_heads, head_dim) in layerzoo's KVCache layout, keys after RoPE."""
    batch, length, _ = x.shape
    positions = torch.arange(length)[None].expand(batch, -1)
    cache = DynamicCache(config=config)
    make_mask = create_causal_mask if getattr(config, "sliding_window", None) is None else create_sliding_window_causal_mask
    # Positional: the cache argument is `past_key_values` in transformers 5.17 (the GPU image's), `cache` in 5.24.
    mask = make_mask(config, x, None, cache, positions, allow_is_causal_skip=False)
    y, _ = layer(x, rotary(x, positions), mask, cache)
    keys, values = cache.layers[0].keys, cache.layers[0].values
    window = getattr(config, "sliding_window", None)
    if window is not None:
        # The last window-1 keys, which is what Mistral's sliding cache keeps except at window 1:
        # it slices [-window + 1:], [0:] there, keeping every key. Qwen3-Next's cache keeps all.
        start = max(keys.shape[2] - (window - 1), 0)
        keys, values = keys[:, :, start:], values[:, :, start:]
    return y, keys.transpose(1, 2), values.transpose(1, 2)


# layerzoo fuses k and v into one kv_proj (keys first); q_proj and out_proj are theirs as they are.
LLAMA: Mapping = {
    "q_proj.weight": Mapped(("q_proj.weight",)),
    "kv_proj.weight": Mapped(("k_proj.weight", "v_proj.weight"), note="cat(k_proj, v_proj) on the output dim"),
    "out_proj.weight": Mapped(("o_proj.weight",), note="o_proj"),
}


# Qwen2 adds biases on q, k, v (fused as the weights are); Qwen3 its qk-norms, stored as ours.
QWEN2: Mapping = LLAMA | {
    "q_proj.bias": Mapped(("q_proj.bias",)),
    "kv_proj.bias": Mapped(("k_proj.bias", "v_proj.bias"), note="cat(k_proj.bias, v_proj.bias)"),
}
QWEN3: Mapping = LLAMA | {
    "q_norm.weight": Mapped(("q_norm.weight",)),
    "k_norm.weight": Mapped(("k_norm.weight",)),
}


def qwen3_next_mapping(n_heads: int, head_dim: int) -> Mapping:
    """Their q_proj is (n_heads * 2 * head_dim, d): per head, head_dim query rows then head_dim
    gate rows; ours splits it into q_proj and gate_proj. Their RMSNorm multiplies by (1 + weight)
    with weight 0 at init, ours by weight with weight 1: ours = theirs + 1."""
    def part(which: int):
        return lambda w: w.view(n_heads, 2, head_dim, -1)[:, which]

    return LLAMA | {
        "q_proj.weight": Mapped(("q_proj.weight",), part(0), note="q_proj.view(H, 2, D, d)[:, 0]"),
        "gate_proj.weight": Mapped(("q_proj.weight",), part(1), note="q_proj.view(H, 2, D, d)[:, 1]"),
        "q_norm.weight": Mapped(("q_norm.weight",), offset=1.0, note="1 + q_norm.weight"),
        "k_norm.weight": Mapped(("k_norm.weight",), offset=1.0, note="1 + k_norm.weight"),
    }


def initialised_llama_attention(d_model: int, n_heads: int, n_kv_heads: int, seed: int) -> nn.Module:
    """Llama's attention as LlamaPreTrainedModel._init_weights leaves it (a one-layer model's)."""
    torch.manual_seed(seed)
    config = LlamaConfig(**common(d_model, n_heads, n_kv_heads, 10000.0))
    return LlamaModel(config).layers[0].self_attn


def initialised_qwen3_next_attention(d_model: int, n_heads: int, n_kv_heads: int, seed: int) -> nn.Module:
    """Qwen3-Next's gated attention as Qwen3NextPreTrainedModel._init_weights leaves it."""
    torch.manual_seed(seed)
    config = qwen3_next_config(d_model, n_heads, n_kv_heads, num_experts=2, num_experts_per_tok=1,
                               moe_intermediate_size=8, shared_expert_intermediate_size=8)
    return Qwen3NextModel(config).layers[0].self_attn
