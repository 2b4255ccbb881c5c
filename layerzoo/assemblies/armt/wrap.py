"""ARMT around an existing causal LM: `wrap`, and loading a local Hugging Face checkpoint."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from ...options import make_section
from ...specs import ARMTConfig
from .model import ARMT


def wrap(model: nn.Module | str | Path, config: ARMTConfig | None = None, **options: Any) -> ARMT:
    """ARMT around a causal LM: a transformers model, a save_pretrained directory, or a layerzoo CausalLM.

    options are ARMTConfig fields, e.g. wrap(model, segment_size=512, num_mem_tokens=16,
    memory_layers=[6, -1]); or pass a whole `config`. The memory starts neutral (W_v = 0), so the
    wrapped model's logits equal the base model's until it is trained.
    """
    if config is None:
        config = make_section(ARMTConfig, options)
    elif options:
        raise TypeError("pass either config or ARMT options, not both")
    if isinstance(model, (str, Path)):
        model = load_hf_checkpoint(model)
    return ARMT(model, config)


def load_hf_checkpoint(path: str | Path) -> nn.Module:
    """A transformers causal LM from a local save_pretrained directory (never the hub). A folder
    whose model needs its own Python code (an `auto_map` in config.json) is refused: layerzoo
    never runs code that came with a checkpoint."""
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
    try:
        from transformers import AutoModelForCausalLM
    except ImportError:
        raise ImportError("wrapping a Hugging Face checkpoint needs transformers: pip install 'layerzoo[hf]'") from None
    return AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True, trust_remote_code=False)
