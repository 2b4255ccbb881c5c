"""Resumable checkpoints: one folder per step.

    model.safetensors      weights (tied tensors stored once)
    trainer.safetensors    optimizer tensors (`optimizer/<param>/<name>`) and RNG states (`rng/...`)
    trainer.json           step, optimizer param groups, metrics of the step
    spec.yaml              the resolved spec the model was built from

Full (unsharded) state dicts via torch.distributed.checkpoint.state_dict, so a plain, DDP or
FSDP2 model writes the same files; every rank calls save (FSDP gathers), rank 0 writes.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions, get_model_state_dict, get_optimizer_state_dict, set_optimizer_state_dict,
)

from ..errors import LayerzooError
from ..specs import Spec, load_spec

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)


class CheckpointError(LayerzooError):
    """A checkpoint that is missing, incomplete, or does not fit the spec it is loaded for."""


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step-{step:08d}"


def latest_checkpoint(path: str | Path) -> Path | None:
    """`path` itself when it is a checkpoint, else the newest checkpoint of the run folder `path`."""
    path = Path(path)
    if (path / "trainer.json").is_file():
        return path
    found = sorted((path / "checkpoints").glob("step-*[0-9]"))
    return found[-1] if found else None


def save_checkpoint(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    spec: Spec, step: int, metrics: dict[str, Any] | None = None, write: bool = True) -> None:
    """Write a checkpoint of `step` completed steps. `write=False` on ranks other than 0."""
    weights = get_model_state_dict(model, options=FULL)
    optim = get_optimizer_state_dict(model, optimizer, options=FULL)
    if not write:
        return
    directory = Path(directory)
    partial = directory.with_name(directory.name + ".partial")  # a crash mid-write leaves no half checkpoint
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    save_file(_unique(weights), partial / "model.safetensors")
    tensors = {f"optimizer/{name}/{key}": value for name, state in optim["state"].items() for key, value in state.items()}
    tensors.update(rng_state())
    save_file({k: v.contiguous() for k, v in tensors.items()}, partial / "trainer.safetensors")
    meta = {"step": step, "param_groups": optim["param_groups"], "metrics": metrics or {}}
    (partial / "trainer.json").write_text(json.dumps(meta, indent=1))
    spec.save(partial / "spec.yaml")
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(partial, directory)


def load_weights(directory: str | Path, model: torch.nn.Module, spec: Spec | None = None) -> Spec:
    """Load the weights of a checkpoint into an unwrapped model; returns the checkpoint's spec.

    With `spec`, first checks that the checkpoint was trained with the same model section.
    """
    directory = Path(directory)
    saved = checkpoint_spec(directory)
    if spec is not None:
        difference = first_difference(saved.model.to_dict(), spec.model.to_dict())
        if difference:
            key, theirs, ours = difference
            raise CheckpointError(f"{directory} does not match spec {spec.name or spec.source}: "
                                  f"model.{key} is {theirs!r} in the checkpoint, {ours!r} in the spec")
    state = load_file(directory / "model.safetensors")
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = set(missing) - _aliases(model)
    if missing or unexpected:
        raise CheckpointError(f"{directory}: weights do not fit the model (missing {sorted(missing)[:3]}, "
                              f"unexpected {sorted(unexpected)[:3]})")
    return saved


def load_training_state(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer) -> dict:
    """Restore optimizer and RNG state into a (possibly wrapped) model's optimizer; returns trainer.json."""
    directory = Path(directory)
    meta = json.loads((directory / "trainer.json").read_text())
    tensors = load_file(directory / "trainer.safetensors")
    state: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            _, name, field = key.split("/")
            state.setdefault(name, {})[field] = value
    set_optimizer_state_dict(model, optimizer, {"state": state, "param_groups": meta["param_groups"]}, options=FULL)
    for group in optimizer.param_groups:
        if isinstance(group.get("betas"), list):  # JSON turned the tuple into a list
            group["betas"] = tuple(group["betas"])
    set_rng_state(tensors)
    return meta


def checkpoint_spec(directory: str | Path) -> Spec:
    directory = Path(directory)
    for name in ("spec.yaml", "model.safetensors", "trainer.json", "trainer.safetensors"):
        if not (directory / name).is_file():
            raise CheckpointError(f"{directory}: not a layerzoo checkpoint (no {name})")
    return load_spec(directory / "spec.yaml")


def rng_state() -> dict[str, torch.Tensor]:
    state = {"rng/torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["rng/cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(tensors: dict[str, torch.Tensor]) -> None:
    torch.set_rng_state(tensors["rng/torch"])
    if "rng/cuda" in tensors and torch.cuda.is_available():
        torch.cuda.set_rng_state(tensors["rng/cuda"])


def first_difference(a: Any, b: Any, prefix: str = "") -> tuple[str, Any, Any] | None:
    """The first dotted key at which two nested dicts differ, with both values; None when equal."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in list(a) + [k for k in b if k not in a]:
            found = first_difference(a.get(key), b.get(key), f"{prefix}.{key}" if prefix else str(key))
            if found:
                return found
        return None
    return None if a == b else (prefix, a, b)


def _unique(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Drop names that alias an earlier tensor (tied embeddings): safetensors stores each once."""
    seen, unique = set(), {}
    for name, tensor in state.items():
        key = (tensor.data_ptr(), tensor.shape)
        if key not in seen:
            seen.add(key)
            unique[name] = tensor.contiguous()
    return unique


def _aliases(model: torch.nn.Module) -> set[str]:
    """Names of the model's state that alias an earlier entry (restored through it)."""
    state = model.state_dict()
    kept = _unique(state)
    return {name for name in state if name not in kept}
