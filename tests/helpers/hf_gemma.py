"""A tiny random Gemma-3 text model (transformers' Gemma3ForCausalLM) saved into a folder: mixed
sliding and global layers, a window shorter than the test sequences, a query_pre_attn_scalar
that is not head_dim, local and global RoPE bases apart, and every norm weight drawn away from
zero so that Gemma's (1 + weight) shows."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import Gemma3ForCausalLM, Gemma3TextConfig

from tests.helpers.hf_teachers import save_tokenizer

VOCAB = 64
D_MODEL = 32


@dataclass(frozen=True)
class GemmaCase:
    n_layers: int = 4
    every: int = 2  # sliding_window_pattern: layers every-1, 2 every-1, ... are global
    window: int = 3
    tied: bool = True
    seed: int = 0

    def config(self) -> Gemma3TextConfig:
        # heads 16 wide: 4 of them are 2 d_model, a width every target accepts (Mamba-2's is a multiple of d_model)
        return Gemma3TextConfig(vocab_size=VOCAB, hidden_size=D_MODEL, intermediate_size=48, num_hidden_layers=self.n_layers,
                                num_attention_heads=4, num_key_value_heads=2, head_dim=16, query_pre_attn_scalar=12,
                                sliding_window=self.window, sliding_window_pattern=self.every, rope_theta=5000.0,
                                rope_local_base_freq=100.0, tie_word_embeddings=self.tied, rms_norm_eps=1e-6,
                                max_position_embeddings=256)


def save_gemma(case: GemmaCase, folder: Path) -> Path:
    """The case's model with weights N(0, 0.3) (norm weights too), saved with a word-level tokenizer."""
    torch.manual_seed(case.seed)
    model = Gemma3ForCausalLM(case.config())
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0, 0.3)
    model.save_pretrained(folder)
    save_tokenizer(folder, VOCAB)
    return folder


def as_hub_config(folder: Path) -> None:
    """Rewrite the folder's config.json as Gemma-3's Hub files have it (transformers 4): rope_theta
    and rope_local_base_freq instead of rope_parameters by layer type, sliding_window_pattern and
    no layer_types."""
    path = folder / "config.json"
    config = json.loads(path.read_text())
    rope = config.pop("rope_parameters")
    del config["layer_types"]
    config |= {"rope_theta": rope["full_attention"]["rope_theta"], "rope_scaling": None,
               "rope_local_base_freq": rope["sliding_attention"]["rope_theta"]}
    path.write_text(json.dumps(config))
