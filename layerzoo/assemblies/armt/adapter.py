"""Saving and loading ARMT's own weights apart from the base model, as one safetensors file.

The file holds the memory tokens and memory layers, with the ARMT config in its metadata, so a
user can ship a small adapter for a public base model: load_adapter(base, path) wraps the base
again and fills in the weights.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import safe_open
from safetensors.torch import save_file
from torch import nn

from .model import ARMT
from .wrap import wrap

FORMAT = "layerzoo-armt-adapter"


def save_adapter(model: ARMT, path: str | Path) -> None:
    """Write model's ARMT weights (not the base model's) and its ARMT config to `path`."""
    tensors = {name: tensor.detach().contiguous() for name, tensor in model.adapter_state_dict().items()}
    save_file(tensors, str(path), metadata={"format": FORMAT, "armt": json.dumps(model.armt_config.to_dict())})


def load_adapter(base: nn.Module | str | Path, path: str | Path) -> ARMT:
    """ARMT around `base` (a model or a save_pretrained directory) with the adapter's weights."""
    with safe_open(str(path), framework="pt") as file:
        metadata = file.metadata() or {}
        if metadata.get("format") != FORMAT:
            raise ValueError(f"{path}: not an ARMT adapter (its metadata has no format {FORMAT!r})")
        tensors = {name: file.get_tensor(name) for name in file.keys()}
    model = wrap(base, **json.loads(metadata["armt"]))
    expected = model.adapter_state_dict()
    for name, tensor in tensors.items():
        if name not in expected or expected[name].shape != tensor.shape:
            found = tuple(expected[name].shape) if name in expected else "nothing"
            raise ValueError(f"{path}: adapter tensor {name} {tuple(tensor.shape)} does not fit this base model "
                             f"(expects {found}); it was saved for another base")
    missing = set(expected) - set(tensors)
    if missing:
        raise ValueError(f"{path}: the adapter lacks {', '.join(sorted(missing))}")
    model.load_state_dict(tensors, strict=False)
    return model
