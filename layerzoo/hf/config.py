"""`LayerzooConfig`: a transformers config holding the resolved `model:` section of a layerzoo spec."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from ..errors import SpecError
from ..registry import get_mixer
from ..specs import ModelConfig, load_spec
from .errors import HFError


class LayerzooConfig(PretrainedConfig):
    """model_spec: the resolved `model:` section (`ModelConfig.to_dict()`: every mixer option
    explicit), so a saved folder's config.json alone describes the architecture. The attributes
    tools read by transformers' names are derived from it (the spec stays the truth):
    vocab_size, hidden_size, num_hidden_layers, tie_word_embeddings; num_attention_heads (the
    first attention layer's heads, else the first layer's that has heads, else 0); head_dim and
    num_key_value_heads (the first attention layer's, or 0 without one: servers such as vLLM
    size their key/value cache by them and read no None); layer_types, one per
    layer in the names transformers' hybrids use ("full_attention", "sliding_attention",
    "linear_attention" for the recurrent ones); sliding_window (the first sliding-window layer's, or None).

    Build one with `LayerzooConfig.from_model_config(model_config)`. It takes PretrainedConfig's
    own keyword arguments too (output_hidden_states, ...).

    Keyword Args:
        model_spec (dict | None): the resolved `model:` section, a mapping; None only for an empty
            config (which no model can be built from).
        vocab_size (int | None): derived from model_spec (a value given is replaced when
            model_spec is set), as are the next five and tie_word_embeddings.
        hidden_size (int | None): derived: d_model.
        num_hidden_layers (int | None): derived: n_layers.
        num_attention_heads (int | None): derived (see above).
        head_dim (int | None): derived (see above).
        num_key_value_heads (int | None): derived (see above).
        layer_types (list[str] | None): derived, one per layer.
        sliding_window (int | None): derived (see above).
        use_cache (bool): whether forward returns a LayerzooCache by default (not with labels).
        tie_word_embeddings (bool): derived: tie_embeddings.
        bos_token_id (int | None): the tokenizer's beginning-of-sequence id, or None.
        eos_token_id (int | list[int] | None): the end-of-sequence id (or ids), or None; generate
            stops at it.
        pad_token_id (int | None): the padding id, or None.

    Raises:
        HFError: model_spec is not a mapping, or a key or value in it is wrong (the message
            names it).
    """

    model_type = "layerzoo"

    model_spec: dict | None = None
    vocab_size: int | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    num_attention_heads: int | None = None
    head_dim: int | None = None
    num_key_value_heads: int | None = None
    layer_types: list[str] | None = None
    sliding_window: int | None = None
    use_cache: bool = True
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None

    def __post_init__(self, **kwargs: Any):
        if self.model_spec is not None:
            self.derive(self.model_config())  # a bad section fails here, in one line naming the key
        super().__post_init__(**kwargs)

    def derive(self, model: ModelConfig) -> None:
        """The attributes transformers' tools read (vocab_size, ..., sliding_window), from `model`."""
        self.vocab_size, self.hidden_size, self.num_hidden_layers = model.vocab_size, model.d_model, model.n_layers
        self.tie_word_embeddings = model.tie_embeddings
        self.num_attention_heads = attention_heads(model)
        self.head_dim, self.num_key_value_heads = attention_shape(model)
        self.layer_types = [layer_type(layer.type) for layer in model.layers]
        windows = [layer.options["window"] for layer in model.layers if layer_type(layer.type) == "sliding_attention"]
        self.sliding_window = windows[0] if windows else None

    def set_model(self, model: ModelConfig) -> None:
        """model_spec, and the attributes derived from it, from `model` (a model's running config)."""
        self.model_spec = model.to_dict()
        self.derive(model)

    @classmethod
    def from_model_config(cls, model: ModelConfig, **kwargs: Any) -> LayerzooConfig:
        """The config of a layerzoo model.

        Args:
            model: the ModelConfig (a spec's `model`, `build(...).config`).
            **kwargs: other fields (eos_token_id, ...).

        Returns:
            The LayerzooConfig whose model_spec is `model.to_dict()`.
        """
        return cls(model_spec=model.to_dict(), **kwargs)

    def model_config(self) -> ModelConfig:
        """The ModelConfig that model_spec resolves to; HFError naming the key that is wrong.

        Returns:
            The ModelConfig, as `load_spec({"model": model_spec}).model`.

        Raises:
            HFError: model_spec is None or not a mapping, or a key or value in it is wrong.
        """
        if self.model_spec is None:
            raise HFError("LayerzooConfig has no model_spec (config.json's model_spec is null): build it with "
                              "LayerzooConfig.from_model_config(...) or LayerzooForCausalLM.from_spec(...)")
        if not isinstance(self.model_spec, dict):
            raise HFError(f"model_spec must be a mapping (a resolved model: section), got {self.model_spec!r:.60}")
        section = dict(self.model_spec)
        overrides = section.get("overrides")
        if isinstance(overrides, dict):  # JSON turned the layer indices into strings
            section["overrides"] = {layer_index(index): value for index, value in overrides.items()}
        try:
            return load_spec({"model": section}).model
        except SpecError as error:  # its place in a dict is a key, not a file's line
            raise HFError(f"model_spec: {str(error).removeprefix(str(error).split(' ', 1)[0] + ' ')}") from None


def layer_index(key: Any) -> int:
    """An overrides key of model_spec as an int; HFError for one that is not."""
    try:
        return int(key)
    except (TypeError, ValueError):
        raise HFError(f"model_spec.overrides: {key!r} is not a layer index") from None


def layer_type(mixer: str) -> str:
    cls = get_mixer(mixer).cls
    return cls.layer_type or mixer


def attention_layers(model: ModelConfig) -> list:
    """The model's attention layers (full or sliding-window), in order."""
    return [layer for layer in model.layers if layer_type(layer.type) in ("full_attention", "sliding_attention")]


def attention_shape(model: ModelConfig) -> tuple[int | None, int | None]:
    """(head_dim, key/value heads) of the first attention layer, or (0, 0) without one."""
    layers = attention_layers(model)
    if not layers:
        return 0, 0
    options = layers[0].options
    return options["head_dim"] or model.d_model // options["n_heads"], options["n_kv_heads"] or options["n_heads"]


def attention_heads(model: ModelConfig) -> int | None:
    """The heads of the first attention layer, else of the first layer whose mixer has heads, else 0."""
    with_heads = [layer for layer in attention_layers(model) + list(model.layers) if "n_heads" in layer.options]
    return with_heads[0].options["n_heads"] if with_heads else 0
