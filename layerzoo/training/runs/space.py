"""Disk space for a run's files: what a checkpoint needs, what the disk has free, and the one line
that a full disk (or a full quota) ends a save or the start of a run with."""

from __future__ import annotations

import errno
import re
import shutil
from collections.abc import Iterable
from pathlib import Path

import torch

from ..errors import TrainingError

FULL = (errno.ENOSPC, errno.EDQUOT)
OS_ERROR = re.compile(r"\(os error (\d+)\)")  # how safetensors' Rust writer reports the OS's error


class DiskFull(TrainingError):
    """A run's file that cannot be written for want of space."""


def is_disk_full(error: BaseException) -> bool:
    """Whether `error` (an OSError, or safetensors' error for a failed write) is the disk's or the
    quota's being full."""
    if isinstance(error, OSError):
        return error.errno in FULL
    found = OS_ERROR.search(str(error))
    return found is not None and int(found.group(1)) in FULL


def free_bytes(folder: Path) -> int:
    """The space free on the disk that holds `folder` (or would: its nearest existing parent)."""
    folder = Path(folder).absolute()
    while not folder.exists():
        folder = folder.parent
    return shutil.disk_usage(folder).free


def tensor_bytes(*groups: dict[str, torch.Tensor]) -> int:
    return sum(tensor.numel() * tensor.element_size() for group in groups for tensor in group.values())


def checkpoint_bytes(model: torch.nn.Module) -> int:
    """About what a checkpoint of `model` holds: its state, and AdamW's two moments per trainable
    parameter (tied weights counted once)."""
    state = {id(tensor): tensor for tensor in model.state_dict(keep_vars=True).values()}
    trainable = {id(p): p for p in model.parameters() if p.requires_grad}
    return tensor_bytes(state) + 2 * tensor_bytes(trainable)


def trained_only_bytes(parameters: Iterable[torch.Tensor]) -> int:
    """About what a checkpoint that holds only what trains holds (save_checkpoint's trained_only):
    those parameters and AdamW's two moments of each (a shared tensor once)."""
    return 3 * tensor_bytes({id(parameter): parameter for parameter in parameters})


def check_room(run_dir: Path, needed: int) -> None:
    """DiskFull, before anything is written, when the disk holding `run_dir` has not `needed` bytes free."""
    free = free_bytes(run_dir)
    if free < needed:
        raise DiskFull(f"{run_dir}: the disk is full: a checkpoint of this model needs {size(needed)}, "
                       f"{size(free)} free there; free space, then run again")


def disk_full(path: Path, needed: int) -> DiskFull:
    """The error of a write to `path` that ran out of space, `needed` bytes being what it writes."""
    return DiskFull(f"{path}: not saved, the disk is full: the save needs {size(needed)}, {size(free_bytes(path))} free "
                    "there; the checkpoints saved before are kept; free space, then continue with --resume")


def size(count: int) -> str:
    """A byte count as people read it: 512 B, 4.0 KiB, 1.3 GiB."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} B"
