"""A sweep's plan: the cartesian product of `--grid KEY=V1,V2,...` values, times seeds, as named
runs, and the manifest (sweep.json) that records each run's grid point, so that `layerzoo compare`
can group the seeds of a point.

A value is YAML text, applied as `--set KEY=VALUE` is; commas inside brackets or quotes do not
split it (`--grid 'training.eval.lengths=[64, 128],[64, 256]'` has two values). A plan of more
runs than a bound is refused before it is expanded, and a message quotes a long flag in part.
"""

from __future__ import annotations

import collections
import itertools
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..errors import ComparisonError

MANIFEST = "sweep.json"
SEED_KEY = "training.seed"
MAX_RUNS = 10_000  # a sweep's default bound: a grid bigger than this is a typo more often than a plan
NAME_BYTES = 255  # the longest folder name common file systems take


@dataclass(frozen=True)
class SweepRun:
    """One run of a sweep: a grid point (key, value as typed) and a training seed."""

    point: tuple[tuple[str, str], ...]
    seed: int

    @property
    def group(self) -> str:
        """The point's name, shared by its seeds: `window.long=16__optimizer.lr=0.001` (training.
        dropped from keys, values made folder-safe); "" for a sweep of seeds alone."""
        return "__".join(f"{key.removeprefix('training.')}={folder_safe(value)}" for key, value in self.point)

    @property
    def name(self) -> str:
        """The run folder's name: the point's, then the seed."""
        return "__".join(part for part in (self.group, f"seed={self.seed}") if part)

    @property
    def overrides(self) -> list[str]:
        """The `--set` assignments that make this run out of the sweep's spec."""
        return [f"{key}={value}" for key, value in self.point] + [f"{SEED_KEY}={self.seed}"]

    def to_dict(self) -> dict:
        return {"name": self.name, "group": self.group, "point": dict(self.point), "seed": self.seed}


def parse_grid(assignments: list[str]) -> list[tuple[str, list[str]]]:
    """`KEY=V1,V2,...` strings -> [(key, [values])], in the order given."""
    grid: list[tuple[str, list[str]]] = []
    for text in assignments:
        key, sep, rest = text.partition("=")
        key = key.strip()
        values = split_values(rest)
        flag = f"--grid {excerpt(text)}"
        if not sep or not key or not values or any(not value for value in values):
            raise ComparisonError(f"{flag}: expected KEY=V1,V2,... with no empty value, e.g. training.window.long=16,32")
        if key == SEED_KEY:
            raise ComparisonError(f"{flag}: --seeds sets {SEED_KEY}; sweep seeds with --seeds N")
        if key in (known for known, _ in grid):
            raise ComparisonError(f"{flag}: {excerpt(key)} is already swept by another --grid; list all its values in one")
        if len(set(values)) < len(values):
            raise ComparisonError(f"{flag}: a value is listed twice")
        grid.append((key, values))
    return grid


def split_values(text: str) -> list[str]:
    """Split at the commas outside brackets, braces and quotes; each value stripped."""
    values, depth, quote, start = [], 0, None, 0
    for index, char in enumerate(text):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
        elif char == "," and depth == 0:
            values.append(text[start:index].strip())
            start = index + 1
    return values + [text[start:].strip()] if text.strip() else []


def plan(grid: list[tuple[str, list[str]]], seeds: Sequence[int], max_runs: int = MAX_RUNS) -> list[SweepRun]:
    """Every point of the grid's cartesian product with every seed, the seeds of a point together;
    refused, before it is expanded, when that is more than `max_runs` runs."""
    count = math.prod(len(values) for _, values in grid) * len(seeds)
    if count > max_runs:
        raise ComparisonError(f"the grid is {shape(grid, len(seeds))}: {count:,} runs, over the bound of {max_runs:,}; "
                              "sweep fewer values, or raise the bound with --max-runs")
    keys = [key for key, _ in grid]
    runs = [SweepRun(tuple(zip(keys, values)), seed)
            for values in itertools.product(*(values for _, values in grid)) for seed in seeds]
    longest = max((run.name for run in runs), key=lambda name: len(name.encode()), default="")
    if len(longest.encode()) > NAME_BYTES:
        raise ComparisonError(f"the run folder name {excerpt(longest)} is longer than the {NAME_BYTES} bytes a folder "
                              "name may have; write the --grid values shorter")
    clash = next((name for name, times in collections.Counter(run.name for run in runs).items() if times > 1), None)
    if clash:
        raise ComparisonError(f"two grid points share the run folder name {clash}: their values differ only in "
                              "characters a folder name drops; write them differently")
    return runs


def shape(grid: list[tuple[str, list[str]]], seeds: int) -> str:
    """`2 x 3 values x 4 seeds`: the sizes whose product is the number of runs."""
    values = " x ".join(str(len(values)) for _, values in grid)
    return (f"{values} values x " if values else "") + f"{seeds:,} seed{'s' if seeds > 1 else ''}"


def excerpt(text: str, limit: int = 60) -> str:
    """`text` as a message quotes it: whole when short, else its start and its length."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


def folder_safe(value: str) -> str:
    """A value as part of a folder name: runs of characters other than letters, digits and
    `. _ + -` become one '-', and none is left at the ends (`[64, 128]` -> `64-128`)."""
    return re.sub(r"[^A-Za-z0-9._+-]+", "-", value).strip("-") or "-"


def spec_argument(spec: str) -> str:
    """The spec as every run (and a later sweep into the same folder) names it: a file's absolute
    path, or a shipped spec's name."""
    return str(Path(spec).resolve()) if Path(spec).is_file() else spec


def write_manifest(out: Path, spec: str, overrides: list[str], runs: list[SweepRun]) -> None:
    """Write <out>/sweep.json: the spec, the overrides of every run and each run's point and seed.
    A sweep into a folder that holds one of the same spec and overrides adds its runs to it (more
    seeds, more values); one of another spec or other overrides is refused."""
    manifest = read_manifest(out) or {"spec": spec, "overrides": overrides, "runs": []}
    if (manifest["spec"], manifest["overrides"]) != (spec, overrides):
        raise ComparisonError(f"{out} holds a sweep of {manifest['spec']} with --set {manifest['overrides']}, not of "
                              f"{spec} with --set {overrides}; choose another --out")
    merged = {run["name"]: run for run in manifest["runs"]}
    merged.update((run.name, run.to_dict()) for run in runs)
    partial = out / f"{MANIFEST}.partial"  # replaced whole, never half-written
    try:
        partial.write_text(json.dumps({**manifest, "runs": list(merged.values())}, indent=1))
    except OSError as error:  # a full disk: nothing left behind
        partial.unlink(missing_ok=True)
        raise ComparisonError(f"{out / MANIFEST}: not written ({error.strerror})") from None
    os.replace(partial, out / MANIFEST)


def read_manifest(folder: Path) -> dict | None:
    """The sweep.json of `folder`, or None when it has none."""
    path = Path(folder) / MANIFEST
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text())
        if not {"spec", "overrides", "runs"} <= manifest.keys() or not all(
                isinstance(run["name"], str) and isinstance(run["group"], str) for run in manifest["runs"]):
            raise TypeError
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ComparisonError(f"{path}: not a sweep manifest (expected JSON with spec, overrides and runs)") from None
    return manifest
