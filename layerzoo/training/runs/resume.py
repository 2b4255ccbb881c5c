"""Resuming a run: the checkpoint must be of the same model and training section, except the
training keys a resumed run may change (config.RESUME_MAY_CHANGE); a difference is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from ...specs import Spec
from .checkpoint import (
    Checkpoint, CheckpointError, check_fits, check_same_model, describe_difference, first_difference, read_checkpoint,
)
from ..config import RESUME_MAY_CHANGE


def read_for_resume(directory: Path, spec: Spec, model: nn.Module) -> Checkpoint:
    """The checkpoint in `directory`, checked to continue `spec`'s run on `model` (unwrapped)."""
    checkpoint = read_checkpoint(directory)
    check_same_run(checkpoint, spec)
    check_fits(checkpoint, model)
    return checkpoint


def check_same_run(checkpoint: Checkpoint, spec: Spec) -> None:
    check_same_model(checkpoint, spec)
    difference = first_difference(fixed_keys(checkpoint.spec.training), fixed_keys(spec.training))
    if difference:
        key, theirs, ours = difference
        may_change = ", ".join(f"training.{key}" for key in RESUME_MAY_CHANGE)
        raise CheckpointError(f"{checkpoint.directory}: {describe_difference(f'training.{key}', theirs, ours)}; "
                              f"a resumed run may change only {may_change} (start a new run with --overwrite "
                              "or another --out)")


def fixed_keys(training: Any) -> dict[str, Any]:
    """The training section without the keys a resumed run may change."""
    data = training.to_dict() if training is not None else {}
    return {key: value for key, value in data.items() if key not in RESUME_MAY_CHANGE}
