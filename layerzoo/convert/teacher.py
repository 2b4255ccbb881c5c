"""What a teacher folder's model is in layerzoo: a ModelConfig whose layers are all attention or
sliding-window attention, and where each tensor of that model comes from in the folder.

Hugging Face families: Llama (SmolLM2 is Llama), Mistral, Qwen2 (biases on q, k, v), Qwen3
(per-head qk RMSNorm, a head_dim of its own), Gemma-3's text model (gemma.py). Each decoder layer
is pre-norm attention then a gated MLP, as layerzoo's Block: input_layernorm -> mixer_norm,
self_attn -> the attention mixer (k_proj and v_proj fused into kv_proj, keys first),
post_attention_layernorm -> ffn_norm, gate_proj and up_proj fused into the FFN's gate_up (gate
first), down_proj -> down; then model.norm -> final_norm and lm_head -> head (none when tied). A
layer with a sliding window (`layer_types`, Mistral's and Qwen's rules) becomes `swa`, the others
`attention`, each with its layer type's RoPE base. A layerzoo folder's tensors are its CausalLM's
under `model.`. Config features layerzoo's layers do not have are refused, each in a line naming
the key.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..assemblies.causal_lm import CausalLM
from ..errors import LayerzooError
from ..hf.config import LayerzooConfig
from ..specs import LayerConfig, MixerConfig, ModelConfig
from . import gemma
from .errors import ConvertError
from .folder import TeacherFolder
from .targets import complete

# model_type -> the causal LM class its folders are saved from.
FAMILIES = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
            "qwen3": "Qwen3ForCausalLM", gemma.MODEL_TYPE: "Gemma3ForCausalLM"}
SUPPORTED = (f"{', '.join(FAMILIES.values())} (SmolLM2 is Llama; Gemma3ForCausalLM is Gemma-3's text model, "
             "model_type gemma3_text), or a layerzoo folder whose layers are attention")
# The GGUF architectures whose files convert: GGUF names them as transformers' model_type, but for
# Gemma-3 (`gemma3`, which transformers dequantizes into a gemma3_text folder).
GGUF_FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma3")
ATTENTION = ("attention", "swa")
LAYER_TYPES = ("full_attention", "sliding_attention")
# config.json's hidden_act (Gemma: hidden_activation) -> the FFN's activation in layerzoo.
ACTIVATIONS = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh"}
Sources = dict[str, tuple[str, ...]]  # our state_dict name -> the folder's tensors, concatenated on dim 0


@dataclass(frozen=True)
class Teacher:
    """model: the teacher as a layerzoo ModelConfig, every layer `attention` or `swa`; sources:
    where each of its tensors comes from; token_ids: bos/eos/pad ids for the converted folder's
    config; plus_one: our tensors that are the folder's plus one (Gemma's (1 + weight) norms)."""

    model: ModelConfig
    sources: Sources
    token_ids: dict[str, Any]
    plus_one: frozenset[str] = frozenset()


def read_teacher(folder: TeacherFolder) -> Teacher:
    config = folder.config
    token_ids = {key: config.get(key) for key in ("bos_token_id", "eos_token_id", "pad_token_id")}
    if config.get("model_type") == "layerzoo":
        return Teacher(*layerzoo_teacher(config), token_ids)
    model, sources, plus_one = hf_teacher(config)
    return Teacher(model, sources, token_ids, frozenset(plus_one))


def hf_teacher(config: dict[str, Any]) -> tuple[ModelConfig, Sources, list[str]]:
    """The model, its sources and the tensors that are the folder's plus one, of a config.json."""
    model_type = config.get("model_type")
    if model_type in gemma.OTHER_GEMMAS:
        raise ConvertError(f"config.json: model_type {model_type!r} ({gemma.OTHER_GEMMAS[model_type]}) is not "
                           f"supported; supported: {SUPPORTED}")
    if model_type not in FAMILIES:
        raise ConvertError(f"config.json: model_type {model_type!r} is not supported; supported: {SUPPORTED}")
    architectures = config.get("architectures") or [FAMILIES[model_type]]
    if architectures != [FAMILIES[model_type]]:
        raise ConvertError(f"config.json: architectures {architectures} is not supported; supported: {SUPPORTED}")
    is_gemma = model_type == gemma.MODEL_TYPE
    if is_gemma:
        config = gemma.with_defaults(config)
    read = ConfigReader(config)
    d_model, n_layers = read.count("hidden_size"), read.count("num_hidden_layers")
    n_heads = read.count("num_attention_heads")
    n_kv_heads = read.count("num_key_value_heads", n_heads)
    head_dim = read.count("head_dim", d_model // n_heads)
    activation_key = "hidden_activation" if is_gemma else "hidden_act"
    activation = read.value(activation_key, "silu")
    if activation not in ACTIVATIONS:
        raise ConvertError(f"config.json: {activation_key} {activation!r} is not supported (the MLP's gate: "
                           f"{', '.join(ACTIVATIONS)})")
    for key in ("attention_bias", "mlp_bias"):  # Qwen2 has no such key: its q, k, v biases are always there
        if read.value(key, False):
            raise ConvertError(f"config.json: {key} true is not supported (layerzoo's layers have no such biases)")
    norm_eps = read.number("rms_norm_eps", 1e-6)
    shared = {"n_heads": n_heads, "n_kv_heads": n_kv_heads, "head_dim": head_dim, "qkv_bias": model_type == "qwen2",
              "qk_norm": model_type in ("qwen3", gemma.MODEL_TYPE)}
    if shared["qk_norm"]:
        shared["qk_norm_eps"] = norm_eps
    if is_gemma:  # Python's float power, as transformers' scaling
        shared["score_scale"] = read.number("query_pre_attn_scalar", 256.0) ** -0.5
    thetas = rope_thetas(config)
    sliding = sliding_layers(config, n_layers)
    kinds = ["swa" if each else "attention" for each in sliding]
    mixers = {}
    for kind in dict.fromkeys(kinds):
        options = shared | {"rope_theta": thetas[LAYER_TYPES[kind == "swa"]]}
        if kind == "swa":
            options["window"] = read.count("sliding_window")
        mixers[kind] = MixerConfig(kind, complete(kind, options, d_model, "config.json: "))
    ffn = read.count("intermediate_size")
    tied = bool(read.value("tie_word_embeddings", False))
    layers = tuple(LayerConfig(kind, kind, mixers[kind].options, ffn) for kind in kinds)
    model = ModelConfig(d_model=d_model, vocab_size=read.count("vocab_size"), layers=layers, mixers=mixers,
                        ffn_hidden=ffn, norm_eps=norm_eps, tie_embeddings=tied,
                        init_std=read.number("initializer_range", 0.02),
                        projection_init="normal", logit_softcap=None,  # transformers' own rule, for what the student draws anew
                        post_norms=is_gemma, ffn_activation=ACTIVATIONS[activation], scale_embeddings=is_gemma)
    return model, *hf_sources(n_layers, shared, tied, is_gemma)


def hf_sources(n_layers: int, options: dict[str, Any], tied: bool, is_gemma: bool) -> tuple[Sources, list[str]]:
    """Where each tensor of the model comes from in a Hugging Face folder, and the tensors that
    are the folder's plus one (Gemma's norms); options: the attention layers' (biases, qk-norm)."""
    sources: Sources = {"embedding.weight": ("model.embed_tokens.weight",), "final_norm.weight": ("model.norm.weight",)}
    plus_one = ["final_norm.weight"] if is_gemma else []
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
        if is_gemma:  # its norms (ffn_norm's too: post_attention_layernorm is the attention's post-norm there)
            norms, ones = gemma.layer_sources(theirs, ours)
            sources |= norms
            plus_one += ones
    if not tied:
        sources["head.weight"] = ("lm_head.weight",)
    return sources, plus_one


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


def rope_thetas(config: dict[str, Any]) -> dict[str, float]:
    """The RoPE base of each layer type (LAYER_TYPES); ConvertError for any RoPE but the default
    (scaled, partial). transformers 5 nests rope_parameters by layer type where they differ
    (Gemma-3); Gemma-3's older config.json gives the sliding layers' base as rope_local_base_freq."""
    parameters = config.get("rope_parameters")
    if isinstance(parameters, dict) and set(parameters) & set(LAYER_TYPES):
        for key in parameters:
            if key not in LAYER_TYPES:
                raise ConvertError(f"config.json: rope_parameters.{key}: not a layer type ({', '.join(LAYER_TYPES)})")
        factor = {"partial_rotary_factor": config.get("partial_rotary_factor", 1.0)}  # all but the layer type's own
        return {kind: rope_theta(factor | {"rope_parameters": parameters.get(kind) or {}}, f"rope_parameters.{kind}")
                for kind in LAYER_TYPES}
    theta = rope_theta(config)
    if config.get("model_type") == gemma.MODEL_TYPE:  # rope_scaling was the global layers' alone
        return {"full_attention": theta, "sliding_attention": ConfigReader(config).number("rope_local_base_freq", 10000.0)}
    return dict.fromkeys(LAYER_TYPES, theta)


def rope_theta(config: dict[str, Any], where: str | None = None) -> float:
    """The RoPE base of rope_parameters (else rope_scaling, else rope_theta); ConvertError, naming
    `where` (the key read), for any RoPE but the default (scaled, partial)."""
    key = "rope_parameters" if config.get("rope_parameters") is not None else "rope_scaling"
    where = where or key
    parameters = config.get(key) or {}
    if not isinstance(parameters, dict):
        raise ConvertError(f"config.json: {where} must be a mapping, got {parameters!r}")
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind not in (None, "default"):
        raise ConvertError(f"config.json: {where}: rope_type {kind!r} is not supported (layerzoo's RoPE is the default, unscaled one)")
    factor = parameters.get("partial_rotary_factor", config.get("partial_rotary_factor", 1.0))
    if factor != 1.0:
        raise ConvertError(f"config.json: partial_rotary_factor {factor} is not supported (layerzoo rotates whole heads)")
    return ConfigReader(config).number("rope_theta", ConfigReader(parameters).number("rope_theta", 10000.0))


def sliding_layers(config: dict[str, Any], n_layers: int) -> list[bool]:
    """Whether each layer has a sliding window (of config.json's sliding_window), by transformers'
    rules: `layer_types` when given; else Gemma-3's `sliding_window_pattern` (every that-many-th
    layer global); Mistral's `sliding_window` on every layer; Qwen's `use_sliding_window` from
    layer `max_window_layers` on."""
    read = ConfigReader(config)
    layer_types = config.get("layer_types")
    if layer_types is not None:
        if not isinstance(layer_types, list) or len(layer_types) != n_layers or not set(layer_types) <= set(LAYER_TYPES):
            raise ConvertError(f"config.json: layer_types must list full_attention or sliding_attention for each of "
                               f"the {n_layers} layers, got {layer_types!r:.80}")
        return [kind == "sliding_attention" for kind in layer_types]
    if config.get("model_type") == gemma.MODEL_TYPE:
        every = read.count("sliding_window_pattern")
        return [bool((index + 1) % every) for index in range(n_layers)]
    if config.get("model_type") == "mistral":
        return [config.get("sliding_window") is not None] * n_layers
    first = read.count("max_window_layers", 0) if read.value("use_sliding_window", False) else n_layers
    return [index >= first for index in range(n_layers)]


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
