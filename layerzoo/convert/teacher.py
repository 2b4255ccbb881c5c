"""What a teacher folder's model is in layerzoo: a ModelConfig whose layers are all attention, and
where each tensor of that model comes from in the folder.

Hugging Face families: Llama (SmolLM2 is Llama), Mistral, Qwen2 (biases on q, k, v), Qwen3
(per-head qk RMSNorm, a head_dim of its own). Each decoder layer is pre-norm attention then a
SwiGLU MLP, as layerzoo's Block: input_layernorm -> mixer_norm, self_attn -> the attention mixer
(k_proj and v_proj fused into kv_proj, keys first), post_attention_layernorm -> ffn_norm,
gate_proj and up_proj fused into the SwiGLU's gate_up (gate first), down_proj -> down; then
model.norm -> final_norm and lm_head -> head (none when tied). A layerzoo folder's tensors are
its CausalLM's under `model.`. Config features layerzoo's layers do not have are refused, each in
a line naming the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..assemblies.causal_lm import CausalLM
from ..errors import LayerzooError
from ..hf.config import LayerzooConfig
from ..specs import LayerConfig, MixerConfig, ModelConfig
from .errors import ConvertError
from .folder import TeacherFolder
from .targets import complete

# model_type -> the causal LM class its folders are saved from.
FAMILIES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM"}
SUPPORTED = f"{', '.join(FAMILIES.values())} (SmolLM2 is Llama), or a layerzoo folder whose layers are attention"
ATTENTION = ("attention", "swa")
Sources = dict[str, tuple[str, ...]]  # our state_dict name -> the folder's tensors, concatenated on dim 0


@dataclass(frozen=True)
class Teacher:
    """model: the teacher as a layerzoo ModelConfig, every layer `attention` or `swa`; sources:
    where each of its tensors comes from; token_ids: bos/eos/pad ids for the converted folder's config."""

    model: ModelConfig
    sources: Sources
    token_ids: dict[str, Any]


def read_teacher(folder: TeacherFolder) -> Teacher:
    config = folder.config
    token_ids = {key: config.get(key) for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    if config.get("model_type") == "layerzoo":
        return Teacher(*layerzoo_teacher(config), token_ids)
    return Teacher(*hf_teacher(config), token_ids)


def hf_teacher(config: dict[str, Any]) -> tuple[ModelConfig, Sources]:
    model_type = config.get("model_type")
    if model_type not in FAMILIES:
        raise ConvertError(f"config.json: model_type {model_type!r} is not supported; supported: {SUPPORTED}")
    architectures = config.get("architectures") or [FAMILIES[model_type]]
    if architectures != [FAMILIES[model_type]]:
        raise ConvertError(f"config.json: architectures {architectures} is not supported; supported: {SUPPORTED}")
    read = ConfigReader(config)
    d_model, n_layers = read.count("hidden_size"), read.count("num_hidden_layers")
    n_heads = read.count("num_attention_heads")
    n_kv_heads = read.count("num_key_value_heads", n_heads)
    head_dim = read.count("head_dim", d_model // n_heads)
    if read.value("hidden_act", "silu") != "silu":
        raise ConvertError(f"config.json: hidden_act {config['hidden_act']!r} is not supported (the MLP is SwiGLU: silu)")
    for key in ("attention_bias", "mlp_bias"):  # Qwen2 has no such key: its q, k, v biases are always there
        if read.value(key, False):
            raise ConvertError(f"config.json: {key} true is not supported (layerzoo's layers have no such biases)")
    options = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "rope_theta": rope_theta(config),
               "qkv_bias": model_type == "qwen2", "qk_norm": model_type == "qwen3"}
    norm_eps = read.number("rms_norm_eps", 1e-6)
    if model_type == "qwen3":
        options["qk_norm_eps"] = norm_eps
    window = sliding_window(config, n_layers)
    kind = "attention" if window is None else "swa"
    if window is not None:
        options["window"] = window
    options = complete(kind, options, d_model, "config.json: ")
    ffn = read.count("intermediate_size")
    tied = bool(read.value("tie_word_embeddings", False))
    model = ModelConfig(d_model=d_model, vocab_size=read.count("vocab_size"),
                        layers=tuple(LayerConfig(kind, kind, options, ffn) for _ in range(n_layers)),
                        mixers={kind: MixerConfig(kind, options)}, ffn_hidden=ffn, norm_eps=norm_eps,
                        tie_embeddings=tied, init_std=read.number("initializer_range", 0.02),
                        projection_init="normal", logit_softcap=None)  # transformers' own rule, for what the student draws anew
    sources: Sources = {"embedding.weight": ("model.embed_tokens.weight",), "final_norm.weight": ("model.norm.weight",)}
    for index in range(n_layers):
        theirs, ours = f"model.layers.{index}.", f"blocks.{index}."
        attention = {"q_proj.weight": ("q_proj.weight",), "kv_proj.weight": ("k_proj.weight", "v_proj.weight"),
                     "out_proj.weight": ("o_proj.weight",)}
        if options["qkv_bias"]:
            attention |= {"q_proj.bias": ("q_proj.bias",), "kv_proj.bias": ("k_proj.bias", "v_proj.bias")}
        if options["qk_norm"]:
            attention |= {"q_norm.weight": ("q_norm.weight",), "k_norm.weight": ("k_norm.weight",)}
        sources |= {ours + "mixer." + name: tuple(theirs + "self_attn." + n for n in names) for name, names in attention.items()}
        sources |= {ours + "mixer_norm.weight": (theirs + "input_layernorm.weight",),
                    ours + "ffn_norm.weight": (theirs + "post_attention_layernorm.weight",),
                    ours + "ffn.gate_up.weight": (theirs + "mlp.gate_proj.weight", theirs + "mlp.up_proj.weight"),
                    ours + "ffn.down.weight": (theirs + "mlp.down_proj.weight",)}
    if not tied:
        sources["head.weight"] = ("lm_head.weight",)
    return model, sources


def layerzoo_teacher(config: dict[str, Any]) -> tuple[ModelConfig, Sources]:
    """A folder layerzoo exported: its model_spec, each layer attention or swa; tensors under `model.`."""
    try:
        model = LayerzooConfig(model_spec=config.get("model_spec")).model_config()
    except LayerzooError as error:
        raise ConvertError(f"config.json: {error}") from None
    for index, layer in enumerate(model.layers):
        if layer.type not in ATTENTION:
            raise ConvertError(f"config.json: layer {index} is {layer.type!r}; a layerzoo teacher's layers must all be "
                               f"attention or swa (supported: {SUPPORTED})")
    with torch.device("meta"):
        names = [name for name, _ in CausalLM(model).named_parameters()]  # a tied head is the embedding's, once
    return model, {name: (f"model.{name}",) for name in names}


def rope_theta(config: dict[str, Any]) -> float:
    """The RoPE base; ConvertError for any RoPE but the default (scaled, partial)."""
    key = "rope_parameters" if config.get("rope_parameters") is not None else "rope_scaling"
    parameters = config.get(key) or {}
    if not isinstance(parameters, dict):
        raise ConvertError(f"config.json: {key} must be a mapping, got {parameters!r}")
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind not in (None, "default"):
        raise ConvertError(f"config.json: {key}: rope_type {kind!r} is not supported (layerzoo's RoPE is the default, unscaled one)")
    factor = parameters.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise ConvertError(f"config.json: partial_rotary_factor {factor} is not supported (layerzoo rotates whole heads)")
    return ConfigReader(config).number("rope_theta", ConfigReader(parameters).number("rope_theta", 10000.0))


def sliding_window(config: dict[str, Any], n_layers: int) -> int | None:
    """The window of every layer, or None for full attention; ConvertError when only some layers
    have one. transformers' rules: `layer_types` when given; else Mistral's `sliding_window` on
    every layer; Qwen's `use_sliding_window` from layer `max_window_layers` on."""
    read = ConfigReader(config)
    layer_types = config.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers or \
                not set(layer_types) <= {"full_attention", "sliding_attention"}:
            raise ConvertError(f"config.json: layer_types must list full_attention or sliding_attention for each of "
                               f"the {n_layers} layers, got {layer_types!r:.80}")
        sliding = [kind == "sliding_attention" for kind in layer_types]
    elif config.get("model_type") == "mistral":
        sliding = [config.get("sliding_window") is not None] * n_layers
    else:
        first = read.count("max_window_layers", 0) if read.value("use_sliding_window", False) else n_layers
        sliding = [index >= first for index in range(n_layers)]
    if any(sliding) and not all(sliding):
        raise ConvertError(f"config.json: layer_types: sliding windows on only some layers ({sum(sliding)} of "
                           f"{n_layers}) are not supported")
    return read.count("sliding_window") if all(sliding) and n_layers else None


class ConfigReader:
    """Values of config.json, type-checked: ConvertError naming the key."""

    def __init__(self, config: dict[str, Any]):
        self.config = config

    def value(self, key: str, default: Any = None) -> Any:
        value = self.config.get(key)
        return default if value is None else value

    def count(self, key: str, default: int | None = None) -> int:
        value = self.value(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "max_window_layers" else 1):
            raise ConvertError(f"config.json: {key} must be a positive integer, got {value!r}")
        return value

    def number(self, key: str, default: float) -> float:
        value = self.value(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
            raise ConvertError(f"config.json: {key} must be a positive number, got {value!r}")
        return float(value)
