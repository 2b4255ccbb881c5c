"""`export_checkpoint`: a torchtitan checkpoint of a layerzoo spec as a layerzoo Hugging Face folder.

The folder is `layerzoo export`'s: config.json (the spec's model at the window it trained with),
model.safetensors and generation_config.json, and the task's tokenizer files when it has any;
`AutoModelForCausalLM.from_pretrained` loads it after `import layerzoo.hf`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemReader

from ...mixers.window import set_window
from ...specs import load_spec
from ...tasks.text.cache import written_whole
from ..config import LayerzooConfig
from ..errors import HFError
from ..export import check_empty, fill
from ..model import LayerzooForCausalLM, check_exportable
from ..quiet import no_transformers_bars
from .adapter import LayerzooStateDictAdapter
from .data import spec_task


def export_checkpoint(checkpoint: str | Path, spec: str, overrides: list[str], out_dir: str | Path) -> Path:
    """Write the weights of torchtitan checkpoint folder `checkpoint` (a `step-N` folder) of `spec`
    with `overrides` (as it was trained) to `out_dir`, new or empty, whole or not at all; returns out_dir.

    Raises:
        HFError: checkpoint is not a torchtitan checkpoint; its weights are not this spec's (names or
            shapes); out_dir exists and is not an empty folder; an ARMT spec (not exported to transformers).
    """
    checkpoint, out_dir = Path(checkpoint), Path(out_dir)
    if not (checkpoint / ".metadata").is_file():
        raise HFError(f"{checkpoint}: not a torchtitan checkpoint folder (no .metadata); give a step-N folder")
    check_empty(out_dir)
    resolved = load_spec(spec, overrides)
    check_exportable(resolved)
    model = LayerzooForCausalLM(LayerzooConfig.from_model_config(resolved.model))
    window = None if resolved.training is None else resolved.training.window.long
    if window is not None:
        set_window(model, window)
    adapter = LayerzooStateDictAdapter(None, None)
    weights = adapter.from_hf(model.state_dict())
    check_same_weights(FileSystemReader(str(checkpoint)).read_metadata().state_dict_metadata, weights, checkpoint, spec)
    dcp.load(weights, checkpoint_id=str(checkpoint), no_dist=True)
    model.load_state_dict(adapter.to_hf(weights))
    tokenizer = spec_task(resolved).tokenizer_files() if resolved.training is not None else {}

    def write(folder: Path) -> None:
        with no_transformers_bars():
            model.save_pretrained(folder)
        for name, path in tokenizer.items():
            shutil.copy2(path, folder / name)

    if out_dir.is_dir():
        fill(out_dir, write)
    else:
        written_whole(out_dir, write)
    return out_dir


def check_same_weights(saved: dict, weights: dict, checkpoint: Path, spec: str) -> None:
    """HFError unless the checkpoint holds every weight of `weights` with its shape."""
    for name, tensor in weights.items():
        entry = saved.get(name)
        if entry is None or not hasattr(entry, "size") or tuple(entry.size) != tuple(tensor.shape):
            found = "missing" if entry is None else f"shaped {tuple(getattr(entry, 'size', ()))}"
            raise HFError(f"{checkpoint} is not a checkpoint of {spec}: its weight {name} is {found}, "
                          f"the spec's is {tuple(tensor.shape)}")
