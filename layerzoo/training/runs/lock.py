"""A folder in use: a training run holds a lock in its run folder, and a sweep one in its sweep
folder, while they write there, so that a second `train` or sweep into the folder is refused in
one line naming the process that holds it, instead of mixing two runs' files.

The lock is an flock(2) on <folder>/layerzoo.lock, which the operating system releases when its
process ends, however it ends: a lock file that a killed process leaves behind is taken over by
the next one. The file names its holder (pid and command) for the message, and is removed when
released. Where there is no flock (Windows, a file system without locks) a folder is not locked.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from ..errors import TrainingError

try:
    import fcntl
except ImportError:
    fcntl = None

LOCK = "layerzoo.lock"


class FolderInUse(TrainingError):
    """A run or sweep folder that a live process writes to."""


@contextlib.contextmanager
def hold(folder: str | Path, command: str) -> Iterator[None]:
    """Hold `folder`'s lock (as `command`, e.g. "layerzoo train") while the block runs, making the
    folder when it is missing and removing it again if the block leaves it empty. FolderInUse when
    another open lock holds it; TrainingError when the folder cannot be written."""
    folder = Path(folder)
    created = not folder.exists()
    try:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            handle = acquire(folder, command)
        except FileExistsError:
            raise TrainingError(f"{folder} is a file, not a folder") from None
        except OSError as error:
            raise not_writable(folder, error.strerror) from None
        try:
            yield
        finally:
            if handle is not None:
                release(folder, handle)
    finally:
        if created:
            with contextlib.suppress(OSError):  # not empty: what the block wrote stays
                folder.rmdir()


def acquire(folder: Path, command: str) -> int | None:
    """The open, locked lock file of `folder`, holding this process's pid and `command`; None where
    locks are not available."""
    if fcntl is None:
        return None
    path = folder / LOCK
    while True:
        handle = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(handle, 256).decode(errors="replace").split(maxsplit=1)
            os.close(handle)
            owner = f"process {holder[0]} ({holder[1].strip()})" if len(holder) == 2 else "another process"
            raise FolderInUse(f"{folder} is in use by {owner}; wait for it to end or stop it, "
                              "or choose another --out") from None
        except OSError:  # the file system has no locks
            os.close(handle)
            return None
        if still_there(handle, path):
            break
        os.close(handle)  # its holder removed it between our open and our lock: lock the next one
    try:
        os.ftruncate(handle, 0)
        os.write(handle, f"{os.getpid()} {command}\n".encode())
    except OSError:  # a full disk: no lock file is left behind
        release(folder, handle)
        raise
    return handle


def release(folder: Path, handle: int) -> None:
    """Remove the lock file, then unlock it: removed first, nobody can lock a file that is gone."""
    with contextlib.suppress(OSError):
        os.unlink(folder / LOCK)
    os.close(handle)


def still_there(handle: int, path: Path) -> bool:
    """Whether `path` still names the file open as `handle`."""
    try:
        return os.path.samestat(os.fstat(handle), os.stat(path))
    except FileNotFoundError:
        return False


def not_writable(folder: Path, reason: str) -> TrainingError:
    return TrainingError(f"{folder}: not writable ({reason}); choose another --out")
