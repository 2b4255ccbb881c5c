"""Resuming a run: the checkpoint must be of the same model and run section (`training:`, or a
distillation's `distill:`), except the keys of that section a resumed run may change
(config.RESUME_MAY_CHANGE for training); a difference is named."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from torch import nn

from ...specs import Spec
from .checkpoint import (
    Checkpoint, CheckpointError, check_fits, check_same_model, describe_difference, first_difference, read_checkpoint,
)
from ..config import RESUME_MAY_CHANGE


def read_for_resume(directory: Path, spec: Spec, model: nn.Module, section: str = "training",
                    may_change: tuple[str, ...] = RESUME_MAY_CHANGE) -> Checkpoint:
    """The checkpoint in `directory`, checked to continue `spec`'s run on `model` (unwrapped):
    the same model, and the same `section` but for its keys in `may_change`."""
    checkpoint = read_checkpoint(directory)
    check_same_run(checkpoint, spec, section, may_change)
    check_fits(checkpoint, model)
    return checkpoint


def check_same_run(checkpoint: Checkpoint, spec: Spec, section: str = "training",
                   may_change: tuple[str, ...] = RESUME_MAY_CHANGE) -> None:
    check_same_model(checkpoint, spec)
    ours, theirs = (fixed_keys(s.sections.get(section), may_change) for s in (spec, checkpoint.spec))
    difference = first_difference(theirs, ours)
    if difference:
        key, theirs, ours = difference
        allowed = ", ".join(f"{section}.{key}" for key in may_change)
        raise CheckpointError(f"{checkpoint.directory}: {describe_difference(f'{section}.{key}', theirs, ours)}; "
                              f"a resumed run may change only {allowed} (start a new run with --overwrite "
                              "or another --out)")


def fixed_keys(section: Any, may_change: tuple[str, ...] = RESUME_MAY_CHANGE) -> dict[str, Any]:
    """A run section (None: none) as a mapping, without the keys a resumed run may change."""
    data = section.to_dict() if section is not None else {}
    return {key: value for key, value in data.items() if key not in may_change}
