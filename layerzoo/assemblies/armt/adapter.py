"""Saving and loading ARMT's own weights apart from the base model, as one safetensors file.

The file holds the memory tokens and memory layers, with the ARMT config in its metadata, so a
user can ship a small adapter for a public base model: load_adapter(base, path) wraps the base
again and fills in the weights. With include_base it also holds the base's parameters (under
`base.`), for a base that was trained too; load_adapter then restores them.
"""

from __future__ import annotations

import json
from pathlib import Path

from safetensors import SafetensorError, safe_open
from safetensors.torch import save_file
from torch import nn

from ...options import make_section
from ...specs import ARMTConfig
from .fingerprint import changed
from .model import ARMT
from .wrap import wrap

FORMAT = "layerzoo-armt-adapter"


def save_adapter(model: ARMT, path: str | Path, include_base: bool = False) -> None:
    """Write model's ARMT weights and its ARMT config to `path`; the base's parameters too with
    include_base.

    Without include_base the file is loaded onto the base as it is on disk, so any change to the
    base's parameters since the ARMT was built (training with wrap(train_base=True), a cast, an
    edit) would be lost: it is refused, checked against the fingerprint taken at wrap time.

    Args:
        model: the ARMT whose memory tokens and memory layers are saved.
        path: the safetensors file to write (replaced if it exists).
        include_base: also save every parameter of the base (under `base.`, tied ones once).

    Raises:
        ValueError: without include_base, base parameters changed since wrap (the first few
            named), or their values at wrap time are unknown (the ARMT was built on the meta device).
    """
    if not include_base:
        if model.base_fingerprint is None:
            raise ValueError("save_adapter: the base's weights at wrap time are unknown (built on the meta device); "
                             "pass include_base=True to save them with the adapter")
        names = changed(model.base, model.base_fingerprint)
        if names:
            raise ValueError(f"save_adapter: {len(names)} base parameter(s) changed since wrap ({', '.join(names[:3])}"
                             f"{', ...' if len(names) > 3 else ''}), which the adapter does not hold; "
                             "pass include_base=True to save them too")
    tensors = dict(model.adapter_state_dict())
    if include_base:  # named_parameters names a tied weight once; safetensors refuses shared storage
        tensors.update({f"base.{name}": parameter for name, parameter in model.base.named_parameters()})
    tensors = {name: tensor.detach().contiguous() for name, tensor in tensors.items()}
    save_file(tensors, str(path), metadata={"format": FORMAT, "armt": json.dumps(model.armt_config.to_dict())})


def load_adapter(base: nn.Module | str | Path, path: str | Path) -> ARMT:
    """ARMT around `base` (a model or a save_pretrained directory) with the adapter's weights,
    and the base's parameters where the file holds them (save_adapter's include_base).

    The file's config and tensor shapes are checked against each other before anything is
    built, so a forged config cannot make the memory layers larger than the file; every problem
    with the file is a one-line ValueError.

    Args:
        base: the base model the adapter was saved for: a model (used, not copied) or a local
            save_pretrained directory.
        path: the adapter file `save_adapter` wrote.

    Returns:
        The ARMT around `base`, with the file's ARMT config and weights.

    Raises:
        ValueError: the file is not a readable safetensors ARMT adapter, its config is missing or
            unusable, its tensors do not match its config or do not fit this base model, or
            some are missing.
    """
    try:
        with safe_open(str(path), framework="pt") as file:
            metadata = file.metadata() or {}
            if metadata.get("format") != FORMAT:
                raise ValueError(f"{path}: not an ARMT adapter (its metadata has no format {FORMAT!r})")
            shapes = {name: tuple(file.get_slice(name).get_shape()) for name in file.keys()}
            config = _config(metadata, path)
            _check_shapes(config, shapes, path)
            tensors = {name: file.get_tensor(name) for name in file.keys()}
    except SafetensorError as error:
        raise ValueError(f"{path}: not a readable safetensors file ({error})") from None
    model = wrap(base, config)
    expected = {**model.adapter_state_dict(),
                **{f"base.{name}": parameter for name, parameter in model.base.named_parameters()}}
    for name, tensor in tensors.items():
        if name not in expected or expected[name].shape != tensor.shape:
            found = tuple(expected[name].shape) if name in expected else "nothing"
            raise ValueError(f"{path}: adapter tensor {name} {tuple(tensor.shape)} does not fit this base model "
                             f"(expects {found}); it was saved for another base")
    missing = {name for name in expected if not name.startswith("base.")} - set(tensors)
    if missing:
        raise ValueError(f"{path}: the adapter lacks {', '.join(sorted(missing))}")
    model.load_state_dict(tensors, strict=False)
    return model


def _config(metadata: dict, path: str | Path) -> ARMTConfig:
    """The ARMTConfig in an adapter's metadata."""
    try:
        return make_section(ARMTConfig, json.loads(metadata["armt"]))
    except KeyError:
        raise ValueError(f"{path}: the adapter's metadata has no 'armt' config") from None
    except (ValueError, TypeError) as error:  # bad JSON, or a JSON value that is not a mapping
        raise ValueError(f"{path}: the adapter's 'armt' config is unusable: {error}") from None


def _check_shapes(config: ARMTConfig, shapes: dict[str, tuple], path: str | Path) -> None:
    """The memory tokens and every memory layer's query and beta have the sizes the config says."""
    tokens = shapes.get("memory_tokens")
    if tokens is None or len(tokens) != 2 or tokens[0] != config.num_mem_tokens:
        raise ValueError(f"{path}: memory_tokens {tokens} does not hold the config's {config.num_mem_tokens} tokens")
    d_model = tokens[1]
    layers = sorted({name.split(".")[1] for name in shapes if name.startswith("memories.")})
    for layer in layers:
        for part, rows in (("query", config.d_mem), ("beta", config.n_heads)):
            name = f"memories.{layer}.{part}.weight"
            if shapes.get(name) != (rows, d_model):
                raise ValueError(f"{path}: {name} {shapes.get(name)} does not match the config ({rows}, {d_model})")
