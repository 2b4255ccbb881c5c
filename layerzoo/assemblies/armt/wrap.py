"""ARMT around an existing causal LM: `wrap`, and loading a local Hugging Face checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...options import make_section
from ...specs import ARMTConfig
from .model import ARMT


def wrap(model: nn.Module | str | Path, config: ARMTConfig | None = None, *, train_base: bool = False,
         **options: Any) -> ARMT:
    """ARMT around a causal LM: a transformers model, a save_pretrained directory, or a layerzoo CausalLM.

    options are ARMTConfig fields, e.g. wrap(model, segment_size=512, num_mem_tokens=16,
    memory_layers=[6, -1]); or pass a whole `config`. The memory starts neutral (W_v = 0), so the
    wrapped model's logits equal the base model's until it is trained.

    What trains: the memory (memory tokens and memory layers) always; the base model's weights
    only with train_base=True. By default they are frozen (requires_grad False, set on the
    model itself), which is what `save_adapter` ships: it saves the memory only, and refuses when
    base weights changed since wrap unless told to save them too.

    Args:
        model: the base causal LM: a transformers model, a local save_pretrained directory or
            GGUF file (loaded with `load_hf_checkpoint`, never from the Hub), or a layerzoo
            CausalLM. Its weights are used, not copied.
        config: the ARMT settings as an ARMTConfig; None: made of `options`.
        train_base: leave the base's weights trainable (requires_grad True); False: freeze them.
        **options: ARMTConfig fields (segment_size and num_mem_tokens required; memory_layers
            or memory_pattern, exactly one; d_mem, n_heads, normalize, truncate_segments,
            checkpoint_segments).

    Returns:
        The ARMT around `model`: `armt(input_ids (B, T))` gives logits (B, T, vocab_size), or the
            mean next-token loss with labels; `armt.generate(prompt, n)`.

    Raises:
        OptionError: an ARMT option is unknown, missing or out of range, or a memory layer index
            is not a layer of the model.
        TypeError: both config and options are given; train_base is not a bool; or the model is not a causal LM whose
            decoder layers ARMT can find.
        ValueError: segment_size + num_mem_tokens exceeds the base model's positions; a directory
            whose checkpoint needs its own code.
        FileNotFoundError: a directory without config.json.
        GGUFError: a GGUF file that cannot be read as a model (layerzoo.hf.gguf), before any tensor is read.
    """
    if not isinstance(train_base, bool):
        raise TypeError(f"train_base must be True or False, got {train_base!r}")
    if config is None:
        config = make_section(ARMTConfig, options)
    elif options:
        raise TypeError("pass either config or ARMT options, not both")
    if isinstance(model, (str, Path)):
        model = load_hf_checkpoint(model)
    armt = ARMT(model, config)
    model.requires_grad_(train_base)
    return armt


def load_hf_checkpoint(path: str | Path, weights: bool = True) -> nn.Module:
    """A transformers causal LM from a local save_pretrained directory or GGUF file (never the
    hub). A folder whose model needs its own Python code (an `auto_map` in config.json) is
    refused: layerzoo never runs code that came with a checkpoint.

    Args:
        path: the directory save_pretrained wrote, or a .gguf file (read as the fp32 folder it
            dequantizes into, layerzoo.hf.gguf).
        weights: False: the model built from its config alone, in its config's dtype, no weight
            read (under a meta device context nothing is allocated).

    Returns:
        The model, from AutoModelForCausalLM.from_pretrained (local files only, no remote code),
            or from_config without weights.

    Raises:
        FileNotFoundError: the directory has no config.json.
        ValueError: config.json is not valid JSON, or has an `auto_map`.
        ImportError: transformers is not installed.
        GGUFError: a GGUF file that cannot be read as a model, before any tensor is read.
    """
    try:
        from transformers import AutoModelForCausalLM

        from ...hf.gguf import gguf_folder, is_gguf  # needs transformers too: imported here, as it is
    except ImportError:
        raise ImportError("wrapping a Hugging Face checkpoint needs transformers: pip install 'layerzoo[hf]'") from None
    if is_gguf(path):
        path = gguf_folder(path)
    config = Path(path) / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{path}: not a Hugging Face checkpoint directory (no config.json)")
    try:
        needs_code = "auto_map" in json.loads(config.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"{config}: not valid JSON ({error})") from None
    if needs_code:
        raise ValueError(f"{path}: the checkpoint needs its own code (config.json has an auto_map); "
                         "layerzoo loads only models transformers ships (trust_remote_code=False)")
    if not weights:
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
        return AutoModelForCausalLM.from_config(config, dtype=config.dtype or torch.float32)
    return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
