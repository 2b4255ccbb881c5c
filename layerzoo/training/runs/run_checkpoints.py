"""The checkpoints of a run folder: `checkpoints/step-N/`, newest first when loading, the newest
K kept when saving, and an older one used when the newest cannot be.

A run folder's checkpoints describe one history: after step N is saved, checkpoints past N (left
unusable before a resume went back to an older one) are removed with the surplus old ones.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Callable, TypeVar

from .checkpoint import CheckpointError, UnusableCheckpoint

log = logging.getLogger(__name__)
Loaded = TypeVar("Loaded")


def checkpoint_dir(run_dir: str | Path, step: int) -> Path:
    return Path(run_dir) / "checkpoints" / f"step-{step:08d}"


def run_checkpoints(run_dir: str | Path) -> list[Path]:
    """The run folder's checkpoint folders, oldest first (unfinished `.partial` writes excluded)."""
    folders = (Path(run_dir) / "checkpoints").glob("step-*")
    return sorted((folder for folder in folders if folder.name.removeprefix("step-").isdigit()), key=step_of)


def latest_checkpoint(path: str | Path) -> Path | None:
    """`path` itself when it is a checkpoint, else the newest checkpoint of the run folder `path`."""
    path = Path(path)
    if (path / "trainer.json").is_file():
        return path
    found = run_checkpoints(path)
    return found[-1] if found else None


def newest_usable(path: str | Path, load: Callable[[Path], Loaded], report: bool = True) -> Loaded | None:
    """load(checkpoint) for `path` itself when it is a checkpoint, else for the run folder's
    checkpoints newest first, until one is not an UnusableCheckpoint; each that is, is reported
    (report=False: silently) in one line. None when the run folder has no checkpoints.

    A checkpoint removed while it is read (a run that is training prunes its older checkpoints
    as it saves newer ones) fails in whatever way its files went missing; the checkpoints are
    then listed again, and the newest one read instead."""
    path = Path(path)
    for _ in range(RELISTS):
        candidates = [path] if (path / "trainer.json").is_file() else run_checkpoints(path)[::-1]
        try:
            return first_usable(candidates, path, load, report)
        except Vanished:
            continue
    raise CheckpointError(f"{path}: its checkpoints were removed while being read, {RELISTS} times; try again")


RELISTS = 8  # each one means the run saved a newer checkpoint meanwhile


class Vanished(Exception):
    """A checkpoint folder that was removed while it was read."""


def first_usable(candidates: list[Path], path: Path, load: Callable[[Path], Loaded], report: bool) -> Loaded | None:
    """newest_usable's search over the listed `candidates`; Vanished when one was removed while read."""
    for index, candidate in enumerate(candidates):
        try:
            return load(candidate)
        except Exception as error:
            if not candidate.exists():
                raise Vanished(candidate) from error
            if not isinstance(error, UnusableCheckpoint):
                raise
            if index + 1 == len(candidates):
                if len(candidates) == 1:
                    raise
                raise UnusableCheckpoint(f"{path}: no usable checkpoint (the oldest: {error})") from None
            if report:
                log.warning("layerzoo: %s; trying %s", error, candidates[index + 1].name)
    return None


def load_newest(path: str | Path, load: Callable[[Path], Loaded]) -> Loaded:
    """newest_usable(path, load), or a CheckpointError when `path` holds no checkpoint at all."""
    loaded = newest_usable(path, load)
    if loaded is None:
        raise CheckpointError(f"{path}: no checkpoint there (expected trainer.json or checkpoints/step-*)")
    return loaded


def prune_checkpoints(run_dir: str | Path, step: int, keep: int | None) -> None:
    """After saving `step`: remove checkpoints past it, unfinished writes, and all but the newest
    `keep` up to it (None: keep them all)."""
    folders = run_checkpoints(run_dir)
    past = [folder for folder in folders if step_of(folder) > step]
    older = [folder for folder in folders if step_of(folder) <= step]
    surplus = older[:-keep] if keep is not None else []
    for folder in past + surplus + list((Path(run_dir) / "checkpoints").glob("*.partial")):
        shutil.rmtree(folder, ignore_errors=True)


def step_of(folder: Path) -> int:
    return int(folder.name.removeprefix("step-"))
