"""Tiny pretrained-like teachers for conversion: transformers' Llama, Mistral, Qwen2 and Qwen3 causal
LMs at hidden size 64 with random weights, saved into a folder, with a word-level tokenizer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from hypothesis import strategies as st
from transformers import (
    AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, PreTrainedTokenizerFast,
    Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM,
)

D_MODEL = 64
VOCAB = 96
FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "mistral": (MistralConfig, MistralForCausalLM),
            "qwen2": (Qwen2Config, Qwen2ForCausalLM), "qwen3": (Qwen3Config, Qwen3ForCausalLM)}


@dataclass(frozen=True)
class TeacherCase:
    family: str
    n_layers: int = 2
    n_heads: int = 4
    n_kv_heads: int = 2
    head_dim: int | None = None  # None: hidden // heads (Qwen3 always sets one)
    tied: bool = False
    theta: float = 10000.0
    eps: float = 1e-6
    window: int | None = None  # Mistral's sliding_window
    seed: int = 0

    def config(self):
        config_class, _ = FAMILIES[self.family]
        extra = {"head_dim": self.head_dim} if self.head_dim else {}
        if self.family == "mistral":
            extra["sliding_window"] = self.window
        return config_class(hidden_size=D_MODEL, intermediate_size=96, num_hidden_layers=self.n_layers,
                            num_attention_heads=self.n_heads, num_key_value_heads=self.n_kv_heads, vocab_size=VOCAB,
                            tie_word_embeddings=self.tied, rms_norm_eps=self.eps,
                            rope_parameters={"rope_type": "default", "rope_theta": self.theta}, **extra)


def save_teacher(case: TeacherCase, folder: Path, shard: str | None = None, tokenizer_size: int | None = VOCAB) -> Path:
    """The case's model with random weights (N(0, 0.3): an init's zeros and ones would hide a
    mapping's mistakes), saved into `folder` (sharded at `shard`, e.g. "20KB"), with a word-level
    tokenizer of tokenizer_size tokens (None: none)."""
    torch.manual_seed(case.seed)
    model = FAMILIES[case.family][1](case.config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3)
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    if tokenizer_size is not None:
        save_tokenizer(folder, tokenizer_size)
    return folder


def save_tokenizer(folder: Path, size: int) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, **{f"w{i}": i for i in range(1, size)}}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="<unk>").save_pretrained(folder)


def reference(folder: Path):
    """transformers' own model from the folder, eager attention, in eval mode."""
    return AutoModelForCausalLM.from_pretrained(folder, attn_implementation="eager").eval()


def edit_config(folder: Path, **changes) -> None:
    path = folder / "config.json"
    config = json.loads(path.read_text())
    config.update(changes)
    path.write_text(json.dumps(config))


@st.composite
def teacher_cases(draw, family: str) -> TeacherCase:
    """A few sizes: GQA ratios 1, 2, 4; tied or untied head; Qwen3 with a head_dim of its own."""
    n_heads, n_kv_heads = draw(st.sampled_from([(4, 4), (4, 2), (4, 1), (8, 2)]))
    head_dim = draw(st.sampled_from([8, 16, 24])) if family == "qwen3" else None
    return TeacherCase(family, n_layers=draw(st.integers(1, 3)), n_heads=n_heads, n_kv_heads=n_kv_heads,
                       head_dim=head_dim, tied=draw(st.booleans()),
                       theta=draw(st.sampled_from([10000.0, 500.0])), eps=draw(st.sampled_from([1e-6, 1e-5])),
                       window=draw(st.sampled_from([None, 4, 64])) if family == "mistral" else None,
                       seed=draw(st.integers(0, 2**16)))
