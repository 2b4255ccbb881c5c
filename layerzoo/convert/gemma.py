"""Gemma-3's text model (transformers' Gemma3ForCausalLM, model_type gemma3_text) in layerzoo's
terms: the defaults transformers gives the keys a config.json leaves out, the features refused,
and where each tensor of a layer comes from.

A Gemma-3 decoder layer is x + post_attention_layernorm(self_attn(input_layernorm(x))), then
x + post_feedforward_layernorm(mlp(pre_feedforward_layernorm(x))): a Block with post_norms. Its
RMSNorms (the qk-norms and the final one too) scale by (1 + weight) in fp32: the converted
weights are the folder's plus one, computed in fp32, so that fp32 products are the same.
"""

from __future__ import annotations

from typing import Any

from .errors import ConvertError

MODEL_TYPE = "gemma3_text"

# transformers' Gemma3TextConfig defaults, for keys a (Hub) config.json leaves out.
DEFAULTS = {"head_dim": 256, "query_pre_attn_scalar": 256, "sliding_window": 4096, "sliding_window_pattern": 6,
            "tie_word_embeddings": True, "hidden_activation": "gelu_pytorch_tanh", "rope_theta": 1_000_000.0,
            "rope_local_base_freq": 10_000.0}

# model_type -> why its folders are not Gemma-3's text model.
OTHER_GEMMAS = {"gemma": "Gemma-1", "gemma2": "Gemma-2: logit softcaps, no qk-norm",
                "gemma3": "Gemma-3 multimodal, Gemma3ForConditionalGeneration: save its text model as Gemma3ForCausalLM",
                "gemma3n": "Gemma-3n: AltUp, Laurel and per-layer inputs", "gemma3n_text": "Gemma-3n: AltUp, Laurel and "
                "per-layer inputs"}


def with_defaults(config: dict[str, Any]) -> dict[str, Any]:
    """A gemma3_text config.json with transformers' defaults where it sets nothing; ConvertError,
    naming the key, for a feature layerzoo's layers do not have."""
    config = DEFAULTS | {key: value for key, value in config.items() if value is not None}
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if key in config:
            raise ConvertError(f"config.json: {key} {config[key]!r} is not supported (Gemma-3 has no logit softcap; "
                               "layerzoo's conversion keeps none)")
    if config.get("use_bidirectional_attention"):
        raise ConvertError("config.json: use_bidirectional_attention true is not supported (layerzoo's attention is causal)")
    return config


def layer_sources(theirs: str, ours: str) -> tuple[dict[str, tuple[str, ...]], list[str]]:
    """A Gemma-3 layer's tensors: our name -> the folder's, and our names that are the folder's plus one."""
    norms = {"mixer_norm": "input_layernorm", "mixer_post_norm": "post_attention_layernorm",
             "ffn_norm": "pre_feedforward_layernorm", "ffn_post_norm": "post_feedforward_layernorm",
             "mixer.q_norm": "self_attn.q_norm", "mixer.k_norm": "self_attn.k_norm"}
    sources = {f"{ours}{name}.weight": (f"{theirs}{their_name}.weight",) for name, their_name in norms.items()}
    return sources, list(sources)
