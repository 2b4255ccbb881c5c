"""`build`: the model a spec describes. The one factory above both assemblies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..specs import ModelConfig, Spec, load_spec
from .armt import ARMT, load_hf_checkpoint
from .causal_lm import CausalLM


def build(spec: str | Path | dict | Spec | ModelConfig, overrides: list[str] = (), device: Any = None,
          dtype: torch.dtype | None = None) -> CausalLM | ARMT:
    """A model from a shipped spec name, a YAML path, a dict, a Spec or a ModelConfig.

    A CausalLM, or with an `armt:` section an ARMT around the spec's `model:` stack (built fresh)
    or its `base:` Hugging Face checkpoint (loaded from its local directory).
    overrides: `dotted.key=value` strings applied on top, as `--set` on the command line.
    device="meta" builds without allocating (to count parameters of a large spec).
    """
    spec = Spec(model=spec) if isinstance(spec, ModelConfig) else load_spec(spec, overrides)
    base = None if spec.hf_checkpoint is None else load_hf_checkpoint(spec.hf_checkpoint).to(device=device or "cpu")
    with torch.device(device or "cpu"):  # ARMT's own modules too: on "meta" nothing is allocated or drawn
        if base is None:
            base = CausalLM(spec.model)
        model = base if spec.armt is None else ARMT(base, spec.armt)
    return model.to(dtype=dtype) if dtype is not None else model
