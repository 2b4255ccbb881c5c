"""Resumable checkpoints: one folder per step.

    model.safetensors      weights (tied tensors stored once; a stage's trained parameters only, with trained_only)
    trainer.safetensors    optimizer tensors (`optimizer/<param>/<name>`) and RNG states (`rng/...`)
    trainer.json           step, optimizer param groups, metrics of the step
    spec.yaml              the resolved spec the model was built from

Full (unsharded) state dicts via torch.distributed.checkpoint.state_dict, so a plain, DDP or
FSDP2 model writes the same files; every rank calls save (FSDP gathers), rank 0 writes; every rank
reads a checkpoint whole and loads what it needs (FSDP: its shards).

A checkpoint is read whole and checked before anything is loaded from it: a missing, truncated or
corrupt file, a trainer.json that save did not write, non-finite values, or tensors that do not fit
the model make it an UnusableCheckpoint (one line), which lets a caller fall back to an older one.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions, get_model_state_dict, get_optimizer_state_dict, set_model_state_dict, set_optimizer_state_dict,
)

from ...errors import LayerzooError
from ...specs import Spec, load_spec
from ...tasks.text.cache import readable_files
from .metrics import finite_or_null
from .space import disk_full, is_disk_full, tensor_bytes

FULL = StateDictOptions(full_state_dict=True, cpu_offload=True)
LOAD = StateDictOptions(full_state_dict=True, strict=False)  # not strict: a tied weight is stored once
FILES = ("spec.yaml", "model.safetensors", "trainer.json", "trainer.safetensors")


class CheckpointError(LayerzooError):
    """A checkpoint that is missing, incomplete, or does not fit the spec it is loaded for."""


class UnusableCheckpoint(CheckpointError):
    """A checkpoint that is wrong in itself (truncated, corrupt, inconsistent): no spec can use it."""


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint read into memory and checked in itself."""

    directory: Path
    spec: Spec
    meta: dict[str, Any]  # trainer.json
    weights: dict[str, torch.Tensor]
    training_state: dict[str, torch.Tensor] | None  # trainer.safetensors, when read

    @property
    def step(self) -> int:
        return self.meta["step"]

    @property
    def trained_only(self) -> bool:
        """Whether its weights are only the parameters its stage trained (save_checkpoint's trained_only)."""
        return self.meta.get("trained_only", False)


def save_checkpoint(directory: str | Path, model: torch.nn.Module, optimizer: torch.optim.Optimizer,
                    spec: Spec, step: int, metrics: dict[str, Any] | None = None, write: bool = True,
                    trained_only: bool = False) -> None:
    """Write a checkpoint of `step` completed steps. `write=False` on ranks other than 0.
    trained_only: model.safetensors holds only the parameters that require gradients (a stage
    that trains part of a model it is given whole; load it with load_weights(..., partial=True))."""
    weights = get_model_state_dict(model, options=FULL)
    optim = get_optimizer_state_dict(model, optimizer, options=FULL)
    if not write:
        return
    directory = Path(directory)
    bad = non_finite(weights)
    if bad:
        raise CheckpointError(f"{directory}: not written, weight {bad} holds non-finite values")
    kept = trained_names(model) if trained_only else weights.keys() - _aliases(model)
    weights = {name: tensor.contiguous() for name, tensor in weights.items() if name in kept}
    tensors = {f"optimizer/{name}/{key}": value for name, state in optim["state"].items() for key, value in state.items()}
    tensors = {key: value.contiguous() for key, value in {**tensors, **rng_state()}.items()}
    meta = {"step": step, "param_groups": optim["param_groups"], "metrics": finite_or_null(metrics or {}),
            **({"trained_only": True} if trained_only else {})}
    partial = directory.with_name(directory.name + ".partial")  # a crash mid-write leaves no half checkpoint
    shutil.rmtree(partial, ignore_errors=True)
    try:
        partial.mkdir(parents=True)
        save_file(weights, partial / "model.safetensors")
        save_file(tensors, partial / "trainer.safetensors")
        (partial / "trainer.json").write_text(json.dumps(meta, indent=1, allow_nan=False))
        spec.save(partial / "spec.yaml")
        readable_files(partial)
    except (OSError, SafetensorError) as error:  # a failed write leaves no partial folder to fill the disk
        shutil.rmtree(partial, ignore_errors=True)
        if is_disk_full(error):
            raise disk_full(directory, tensor_bytes(weights, tensors)) from None
        raise
    shutil.rmtree(directory, ignore_errors=True)
    os.replace(partial, directory)


def read_checkpoint(directory: str | Path, training_state: bool = True) -> Checkpoint:
    """Read and check a checkpoint folder; training_state=False skips the optimizer file (evaluation)."""
    directory = Path(directory)
    spec = checkpoint_spec(directory)
    meta = read_meta(directory / "trainer.json")
    weights = read_tensors(directory / "model.safetensors")
    state = read_tensors(directory / "trainer.safetensors") if training_state else None
    if state is not None and "rng/torch" not in state:
        raise UnusableCheckpoint(f"{directory}/trainer.safetensors: no rng/torch state")
    return Checkpoint(directory, spec, meta, weights, state)


def checkpoint_spec(directory: str | Path) -> Spec:
    """The spec a checkpoint was trained with, once its four files are known to be there."""
    directory = Path(directory)
    for name in FILES:
        if not (directory / name).is_file():
            raise UnusableCheckpoint(f"{directory}: not a layerzoo checkpoint (no {name})")
    try:
        return load_spec(directory / "spec.yaml")
    except LayerzooError as error:  # its message names the file
        raise UnusableCheckpoint(str(error)) from None


def load_weights(checkpoint: str | Path | Checkpoint, model: torch.nn.Module, spec: Spec | None = None,
                 partial: bool = False) -> Spec:
    """Load a checkpoint's weights into an unwrapped model; returns the checkpoint's spec.

    With `spec`, first checks that the checkpoint was trained with the same model. partial: the
    checkpoint may hold only what its stage trained (save_checkpoint's trained_only), loaded over
    the model's own tensors; without it such a checkpoint is refused, as no whole model.
    """
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = read_checkpoint(checkpoint, training_state=False)
    if checkpoint.trained_only and not partial:
        raise CheckpointError(f"{checkpoint.directory}: holds only the parameters its stage trained, not a whole model "
                              "(a distillation's stage; its run's model/ folder holds the whole student)")
    if spec is not None:
        check_same_model(checkpoint, spec)
    check_fits(checkpoint, model)
    set_model_state_dict(model, checkpoint.weights, options=LOAD)
    return checkpoint.spec


def load_training_state(checkpoint: str | Path | Checkpoint, model: torch.nn.Module,
                        optimizer: torch.optim.Optimizer) -> dict:
    """Restore optimizer and RNG state into a (possibly wrapped) model's optimizer; returns trainer.json.
    `checkpoint`: a folder, or a Checkpoint read with its training state."""
    if not isinstance(checkpoint, Checkpoint):
        checkpoint = read_checkpoint(checkpoint)
    tensors = checkpoint.training_state
    state: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in tensors.items():
        if key.startswith("optimizer/"):
            _, name, field = key.split("/")
            state.setdefault(name, {})[field] = value
    groups = checkpoint.meta["param_groups"]
    set_optimizer_state_dict(model, optimizer, {"state": state, "param_groups": groups}, options=FULL)
    for group in optimizer.param_groups:
        if isinstance(group.get("betas"), list):  # JSON turned the tuple into a list
            group["betas"] = tuple(group["betas"])
    set_rng_state(tensors)
    return checkpoint.meta


def check_same_model(checkpoint: Checkpoint, spec: Spec) -> None:
    """CheckpointError naming the first key at which the spec's model differs from the checkpoint's."""
    difference = first_difference(weights_sections(checkpoint.spec), weights_sections(spec))
    if difference:
        raise CheckpointError(f"{checkpoint.directory} does not match spec {spec.name or spec.source}: "
                              f"{describe_difference(*difference)}")


def check_fits(checkpoint: Checkpoint, model: torch.nn.Module) -> None:
    """UnusableCheckpoint unless the checkpoint's tensors have the model's names and shapes."""
    expected = {name: tensor.shape for name, tensor in model.state_dict().items() if name not in _aliases(model)
                and (name in checkpoint.weights or not checkpoint.trained_only)}
    misfit = shape_misfit(checkpoint.weights, expected)
    if misfit:
        raise UnusableCheckpoint(f"{checkpoint.directory}/model.safetensors does not fit the model of its spec: {misfit}")
    if checkpoint.training_state is None:
        return
    params = dict(model.named_parameters())
    moments = {key: value for key, value in checkpoint.training_state.items() if key.startswith("optimizer/")}
    for key, value in moments.items():
        parts = key.split("/")
        param = params.get(parts[1]) if len(parts) == 3 else None
        if param is None or (value.dim() and value.shape != param.shape):
            raise UnusableCheckpoint(f"{checkpoint.directory}/trainer.safetensors does not fit the model of its spec: {key}")
    names = {name for group in checkpoint.meta["param_groups"] for name in group["params"]}
    if not names <= params.keys():
        raise UnusableCheckpoint(f"{checkpoint.directory}/trainer.json: optimizer groups name parameters the model "
                                 f"does not have: {sorted(names - params.keys())[:3]}")


def shape_misfit(tensors: dict[str, torch.Tensor], expected: dict[str, torch.Size]) -> str | None:
    """The first name that is missing, unexpected or of another shape; None when all fit."""
    for name, shape in expected.items():
        if name not in tensors:
            return f"no {name}"
        if tensors[name].shape != shape:
            return f"{name} is {list(tensors[name].shape)} in the file, {list(shape)} in the model"
    unexpected = sorted(tensors.keys() - expected.keys())
    return f"unexpected {unexpected[0]}" if unexpected else None


def read_meta(path: Path) -> dict[str, Any]:
    """trainer.json, checked to be what save_checkpoint writes."""
    try:
        meta = json.loads(path.read_text())
    except (ValueError, RecursionError) as error:
        raise UnusableCheckpoint(f"{path}: not valid JSON ({error})") from None
    if not isinstance(meta, dict):
        raise UnusableCheckpoint(f"{path}: expected a JSON object, got {type(meta).__name__}")
    step = meta.get("step")
    if type(step) is not int or step < 1:
        raise UnusableCheckpoint(f"{path}: step must be a whole number >= 1, got {step!r}")
    groups = meta.get("param_groups")
    if not isinstance(groups, list) or not all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in groups):
        raise UnusableCheckpoint(f"{path}: param_groups must be a list of optimizer groups with params")
    if not isinstance(meta.get("metrics", {}), dict):
        raise UnusableCheckpoint(f"{path}: metrics must be a JSON object")
    if not isinstance(meta.get("trained_only", False), bool):
        raise UnusableCheckpoint(f"{path}: trained_only must be true or false, got {meta['trained_only']!r}")
    return meta


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    try:
        tensors = load_file(path)
    except SafetensorError as error:
        raise UnusableCheckpoint(f"{path}: truncated or corrupt ({error})") from None
    bad = non_finite(tensors)
    if bad:
        raise UnusableCheckpoint(f"{path}: holds non-finite values ({bad})")
    return tensors


def non_finite(tensors: dict[str, torch.Tensor]) -> str | None:
    """The name of the first floating-point tensor with a NaN or infinity; None when all are finite."""
    return next((name for name, tensor in tensors.items()
                 if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all())), None)


def weights_sections(spec: Spec) -> dict[str, Any]:
    """The parts of a spec that decide the weights' meaning: the model, ARMT, its Hugging Face base."""
    data = spec.to_dict()
    return {key: data[key] for key in ("model", "armt", "base") if key in data}


def describe_difference(key: str, theirs: Any, ours: Any) -> str:
    return f"{key} is {theirs!r} in the checkpoint, {ours!r} in the spec"


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


def trained_names(model: torch.nn.Module) -> set[str]:
    """The state-dict names of the parameters that require gradients (a tied one by its first name)."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    return {name for name, parameter in model.named_parameters() if parameter.requires_grad}


def _aliases(model: torch.nn.Module) -> set[str]:
    """Names of the model's state that alias an earlier entry (tied embeddings): stored once,
    restored through the first name. Found by identity, which holds on the meta device and
    sharded too (a gathered FSDP state dict has a copy per name). A DDP model: its module's names."""
    if isinstance(model, torch.nn.parallel.DistributedDataParallel):
        model = model.module
    seen, aliases = set(), set()
    for name, tensor in model.state_dict(keep_vars=True).items():
        if id(tensor) in seen:
            aliases.add(name)
        seen.add(id(tensor))
    return aliases
