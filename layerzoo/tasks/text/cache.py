"""Where the text task keeps what it builds once (token shards, trained tokenizers), and how a
build is published: content-addressed folders, written whole or not at all.

The cache lives in $LAYERZOO_CACHE, else $XDG_CACHE_HOME/layerzoo, else ~/.cache/layerzoo: one
place per user rather than one per run folder, because a folder's name is the hash of everything
that decides its content (the files' bytes, the tokenizer's), so it is safe to share, and every
run and evaluation over the same corpus tokenizes it once. Run folders stay small.

A build writes into `<key>.partial-<pid>` and renames it to `<key>` when complete (one atomic
rename), so an interrupted build never leaves a folder that looks finished. A lock file makes
concurrent builders of one key (torchrun's ranks, two runs) wait for the first instead of
repeating its work; whoever holds the lock clears partial folders that a killed build left.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

try:
    import fcntl
except ImportError:  # not POSIX: builders of one key each build; the rename still publishes one whole result
    fcntl = None


def cache_root() -> Path:
    if os.environ.get("LAYERZOO_CACHE"):
        return Path(os.environ["LAYERZOO_CACHE"]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "layerzoo"


_FILE_HASHES: dict[tuple[str, int, int], str] = {}


def file_hash(path: Path) -> str:
    """blake2b of the file's bytes, remembered in this process while its size and mtime stay."""
    stat = path.stat()
    memo = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if memo not in _FILE_HASHES:
        digest = hashlib.blake2b(digest_size=16)
        with path.open("rb") as file:
            while chunk := file.read(1 << 20):
                digest.update(chunk)
        _FILE_HASHES[memo] = digest.hexdigest()
    return _FILE_HASHES[memo]


def content_key(*parts: str) -> str:
    return hashlib.blake2b("\0".join(parts).encode(), digest_size=16).hexdigest()


@contextlib.contextmanager
def locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as file:
        if fcntl is not None:
            fcntl.flock(file, fcntl.LOCK_EX)  # released when the file closes, or the process dies
        yield


def built(folder: Path, build: Callable[[Path], None]) -> Path:
    """`folder`, built by build(partial_folder) unless it exists; see the module docstring."""
    if folder.is_dir():
        return folder
    with locked(folder.with_name(folder.name + ".lock")):
        if folder.is_dir():  # another process built it while this one waited
            return folder
        for stale in folder.parent.glob(folder.name + ".partial-*"):
            shutil.rmtree(stale, ignore_errors=True)
        try:
            written_whole(folder, build)
        except BaseException:
            if not folder.is_dir():
                raise
    return folder


def readable_files(folder: Path) -> None:
    """Every file under `folder` given the mode a plain open() gives (0644 under the usual umask 022):
    a writer that goes through a private temporary file (safetensors' save_file) leaves 0600, which
    other users and containers of a shared folder cannot read."""
    umask = os.umask(0)
    os.umask(umask)
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(0o666 & ~umask)


def written_whole(folder: Path, write: Callable[[Path], None]) -> Path:
    """`folder` written by write(partial_folder) into `<folder>.partial-<pid>` and renamed onto
    `folder` (absent, or an empty folder) in one step; on any error or interrupt the partial
    folder is removed, so nothing half-written is ever at `folder`. A run folder's tokenizer and
    `layerzoo export` are written so too."""
    partial = folder.with_name(f"{folder.name}.partial-{os.getpid()}")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    try:
        write(partial)
        readable_files(partial)
        os.replace(partial, folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    return folder
