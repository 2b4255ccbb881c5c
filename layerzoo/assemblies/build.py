"""`build`: the model a spec describes. The one factory above both assemblies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import nn

from ..specs import ModelConfig, Spec, load_spec
from .armt import ARMT, load_hf_checkpoint
from .causal_lm import CausalLM


def build(spec: str | Path | dict | Spec | ModelConfig, overrides: list[str] = (), device: Any = None,
          dtype: torch.dtype | None = None) -> CausalLM | ARMT:
    """A model from a shipped spec name, a YAML path, a dict, a Spec or a ModelConfig.

    A CausalLM, or with an `armt:` section an ARMT around the spec's `model:` stack (built fresh)
    or its `base:` Hugging Face checkpoint (loaded from its local directory; frozen unless
    `base: {train: true}`, so that training trains the memory only).
    overrides: `dotted.key=value` strings applied on top, as `--set` on the command line.
    device="meta" builds without allocating (to count parameters of a large spec).

    Args:
        spec: a shipped spec's name (see `shipped_specs`), a YAML path, a dict, a Spec (each read
            by `load_spec`), or a ModelConfig (built as it is).
        overrides: `dotted.key=value` strings, as `--set` on the command line; not applied to a
            ModelConfig.
        device: where the parameters are made (a torch device or its name); None: the CPU.
            "meta" allocates nothing.
        dtype: the parameters' dtype (torch.bfloat16, ...); None: fp32, as initialised.

    Returns:
        The model: a CausalLM (`model(input_ids)` maps (B, T) token ids to (B, T, vocab_size)
            logits), or an ARMT for a spec with an `armt:` section.

    Raises:
        SpecError: the spec cannot be read or is invalid (the message names the file, line and key).
        FileNotFoundError: an ARMT spec's `base:` checkpoint directory has no config.json.
        ValueError: that checkpoint needs its own code (an `auto_map`), which layerzoo never runs.
    """
    spec = Spec(model=spec) if isinstance(spec, ModelConfig) else load_spec(spec, overrides)
    base = None
    if spec.hf_checkpoint is not None and torch.device(device or "cpu").type == "meta":
        with torch.device("meta"):  # the modules alone: from_pretrained refuses to load into meta
            base = load_hf_checkpoint(spec.hf_checkpoint, weights=False)
    elif spec.hf_checkpoint is not None:
        base = load_hf_checkpoint(spec.hf_checkpoint).to(device=device or "cpu")
    with torch.device(device or "cpu"):  # ARMT's own modules too: on "meta" nothing is allocated or drawn
        if base is None:
            base = CausalLM(spec.model)
        model = base if spec.armt is None else ARMT(base, spec.armt)
    if spec.hf_checkpoint is not None:
        base.requires_grad_(spec.train_base)
    return model.to(dtype=dtype) if dtype is not None else model


def vocab_size(spec: Spec, model: nn.Module | None = None) -> int:
    """The vocabulary a model of `spec` (`model`, if built) takes tokens of: the spec's model's, or
    for ARMT around a Hugging Face checkpoint (`base:`) the checkpoint's config's."""
    if spec.model is not None:
        return spec.model.vocab_size
    return (model if model is not None else build(spec, device="meta")).config.vocab_size
