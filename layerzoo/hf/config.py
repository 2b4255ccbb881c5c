"""`LayerzooConfig`: a transformers config holding the resolved `model:` section of a layerzoo spec."""

from __future__ import annotations

from typing import Any

from transformers import PretrainedConfig

from ..specs import ModelConfig, load_spec


class LayerzooConfig(PretrainedConfig):
    """model_spec: the resolved `model:` section (`ModelConfig.to_dict()`: every mixer option
    explicit), so a saved folder's config.json alone describes the architecture. vocab_size,
    hidden_size and num_hidden_layers are copied from it for tools that read those names
    (lm-evaluation-harness, transformers' own utilities); the spec stays the truth.
    """

    model_type = "layerzoo"

    model_spec: dict | None = None
    vocab_size: int | None = None
    hidden_size: int | None = None
    num_hidden_layers: int | None = None
    use_cache: bool = True
    tie_word_embeddings: bool = False
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    pad_token_id: int | None = None

    def __post_init__(self, **kwargs: Any):
        if self.model_spec is not None:
            model = self.model_config()  # a bad section fails here, in one line naming the key
            self.vocab_size, self.hidden_size, self.num_hidden_layers = model.vocab_size, model.d_model, model.n_layers
            self.tie_word_embeddings = model.tie_embeddings
        super().__post_init__(**kwargs)

    @classmethod
    def from_model_config(cls, model: ModelConfig, **kwargs: Any) -> LayerzooConfig:
        return cls(model_spec=model.to_dict(), **kwargs)

    def model_config(self) -> ModelConfig:
        """The ModelConfig that model_spec resolves to."""
        if self.model_spec is None:
            raise ValueError("LayerzooConfig has no model_spec: build it with LayerzooConfig.from_model_config(...)")
        section = dict(self.model_spec)
        if "overrides" in section:  # JSON turned the layer indices into strings
            section["overrides"] = {int(index): value for index, value in section["overrides"].items()}
        return load_spec({"model": section}).model
