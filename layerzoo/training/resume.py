"""Resuming a run: the checkpoint must be usable and of the same model."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from ..specs import Spec
from .checkpoint import Checkpoint, check_fits, check_same_model, read_checkpoint


def read_for_resume(directory: Path, spec: Spec, model: nn.Module) -> Checkpoint:
    """The checkpoint in `directory`, checked to continue `spec`'s run on `model` (unwrapped)."""
    checkpoint = read_checkpoint(directory)
    check_same_model(checkpoint, spec)
    check_fits(checkpoint, model)
    return checkpoint
