"""A saved folder's weights against its config, before transformers loads them.

The shapes come from the safetensors headers (nothing is allocated) and the model config.json
describes (as transformers builds it, on the meta device), so weights of another model are one line
naming the first tensor that does not fit and both shapes, not transformers' report and RuntimeError.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError, safe_open
from torch import nn

from .errors import HFError

WEIGHTS = "model.safetensors"
INDEX = "model.safetensors.index.json"  # the shard map of a folder saved in several files


def check_weight_shapes(folder: Path, model: nn.Module) -> None:
    """HFError naming the first tensor of the folder's safetensors files whose shape is not the
    one `model` (on any device, meta too) has under its state_dict name. Tensors the model does
    not have, and those the folder lacks, are left to transformers' loading report."""
    expected = {name: tuple(tensor.shape) for name, tensor in model.state_dict().items()}
    for file in weight_files(folder):
        try:
            with safe_open(file, framework="pt") as weights:
                for key in weights.keys():
                    shape = tuple(weights.get_slice(key).get_shape())
                    if key in expected and shape != expected[key]:
                        raise HFError(f"{file}: {key} has shape {shape}, but the model of config.json needs "
                                      f"{expected[key]}: the weights are of another model (ignore_mismatched_sizes=True "
                                      "initialises such tensors afresh)")
        except SafetensorError as error:
            raise HFError(f"{file}: not a readable safetensors file ({error})") from None


def weight_files(folder: Path) -> list[Path]:
    """The folder's safetensors files: model.safetensors, or the shards its index names (none
    when the index is unreadable: transformers then says why)."""
    if (folder / WEIGHTS).is_file():
        return [folder / WEIGHTS]
    try:
        shards = json.loads((folder / INDEX).read_text())["weight_map"].values()
        return [folder / name for name in sorted(set(shards)) if (folder / name).is_file()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
