"""Corpus discovery: file patterns resolved to files, each file once.

A pattern is a path or a glob with glob's syntax and matches (`*`, `?` and `[...]` within a name,
`**` any folders, names starting with `.` only where the pattern spells the dot); `stdlib:PATTERN`
is relative to this Python's standard library (sysconfig's "stdlib" path), the one corpus every
machine has, without the site-packages / dist-packages folders some installations keep inside it
(third-party code that differs from machine to machine).

Symlinks are followed, but a file is read once however many paths reach it (symlinks, hard
links, a folder linked twice): a file read twice would count as two documents, and could land in
the training and the held-out split at once. `**` enters each real folder once, so a symlink loop
ends instead of being walked until the path is too long (glob.glob's `**` walks a folder linked
to itself 40 times, and one with two such links 2**40 times).
"""

from __future__ import annotations

import fnmatch
import os
import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path
from stat import S_ISREG

from ...errors import OptionError

STDLIB = "stdlib:"
THIRD_PARTY = ("site-packages", "dist-packages")
MAGIC = re.compile(r"[*?[]")


def resolve_files(patterns: tuple[str, ...]) -> list[Path]:
    """The files `patterns` name, each pattern's matches sorted, in pattern order, each file once
    (under the first path that reached it). OptionError("files") for a pattern that matches no file."""
    files: dict[tuple[int, int], Path] = {}
    for pattern in patterns:
        matches = stdlib_matches(pattern[len(STDLIB):]) if pattern.startswith(STDLIB) else sorted(
            pattern_matches(os.path.expanduser(pattern)), key=lambda match: str(match[0]))
        if not matches:
            raise OptionError("files", f"{pattern}: no such file (a path, a glob, or stdlib:GLOB)")
        for path, identity in matches:
            files.setdefault(identity, path)
    return list(files.values())


def pattern_matches(pattern: str) -> list[tuple[Path, tuple[int, int]]]:
    """The files a path or glob matches, unsorted; the folders before its first wildcard are its base."""
    parts = Path(pattern).parts
    literal = next((index for index, part in enumerate(parts) if MAGIC.search(part)), len(parts))
    return matching_files(Path(*parts[:literal]) if literal else Path(), parts[literal:])


def stdlib_matches(pattern: str) -> list[tuple[Path, tuple[int, int]]]:
    """The standard library's files that match the glob `pattern`, sorted; the third-party folders
    (often larger than the library) are never entered."""
    root = Path(sysconfig.get_paths()["stdlib"])
    return sorted(matching_files(root, Path(pattern).parts, frozenset(root / name for name in THIRD_PARTY)))


def matching_files(base: Path, parts: tuple[str, ...], skip: frozenset[Path] = frozenset()
                   ) -> list[tuple[Path, tuple[int, int]]]:
    """(path, (device, inode)) of the files under `base` that match the glob components `parts`
    (() for base itself); folders in `skip` are never entered."""
    found = []
    for path in expand(base, parts, skip):
        stat = stat_of(path)
        if stat is not None and S_ISREG(stat.st_mode):
            found.append((path, (stat.st_dev, stat.st_ino)))
    return found


def stat_of(path: Path) -> os.stat_result | None:
    """The stat of what `path` leads to through symlinks; None when it leads nowhere (missing, a
    broken link or a link loop, or gone since it was listed)."""
    try:
        return path.stat()
    except OSError:
        return None


def expand(folder: Path, parts: tuple[str, ...], skip: frozenset[Path]) -> Iterator[Path]:
    """The paths that `parts` match below `folder`, one component at a time, as glob does."""
    if not parts:
        yield folder
        return
    head, rest = parts[0], parts[1:]
    if head == "**":
        for below in folders_below(folder, skip):
            yield from expand(below, rest, skip) if rest else children(below, "*", skip)
    elif MAGIC.search(head):
        for path in children(folder, head, skip):
            yield from expand(path, rest, skip)
    else:
        yield from expand(folder / head, rest, skip)


def children(folder: Path, pattern: str, skip: frozenset[Path]) -> list[Path]:
    """The entries of `folder` whose names match the glob `pattern`, sorted; hidden names only
    when the pattern starts with a dot."""
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for entry in entries)
    except OSError:  # not a folder, or not readable: glob matches nothing there either
        return []
    return [folder / name for name in names if fnmatch.fnmatchcase(name, pattern)
            and (pattern.startswith(".") or not name.startswith(".")) and folder / name not in skip]


def folders_below(top: Path, skip: frozenset[Path]) -> Iterator[Path]:
    """`top` and every folder under it that is not hidden, through symlinks, depth first in name
    order, each real folder once (the first path to reach it): a folder reached again is not
    entered again, so a symlink loop ends."""
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        stat = stat_of(folder)
        if stat is None or (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        yield folder
        stack.extend(reversed([path for path in children(folder, "*", skip) if path.is_dir()]))
