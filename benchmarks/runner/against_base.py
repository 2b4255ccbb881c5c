"""--base REV: the same benchmark run here and at another git revision, cell by cell.

REV is checked out into a temporary git worktree; the two trees' runs alternate in fresh
processes (base, current, base, current, ... for --passes passes), each importing its own tree
(PYTHONPATH at that tree), so a busy spell of the machine falls on both. Each measure of a cell
is the best over the passes; the JSON (default benchmarks/results/ab/NAME.json) and the table
give current, base and current / base per cell. The worktree is removed however the run ends.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from .context import ROOT, git
from .registry import Benchmark
from .render import context_line
from .results import RESULTS, find_row, measures, read_json, write_json
from .tables import markdown_table, mib, ms

RUNNER = "benchmarks/__main__.py"


def without_base_options(argv: list[str]) -> list[str]:
    """argv less --base, --passes and --out: what each side's run is given (with its own --out)."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for option in ("--base", "--passes", "--out"):
        parser.add_argument(option)
    return parser.parse_known_args(argv)[1]


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM raises SystemExit while inside, so cleanup in finally blocks runs as for Ctrl-C."""
    def stop(signum, frame):
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def temporary_worktree(commit: str) -> Iterator[Path]:
    """A detached git worktree of commit in a temporary folder, removed on the way out."""
    scratch = Path(tempfile.mkdtemp(prefix="benchmarks-base-"))
    tree = scratch / "tree"
    try:
        added = subprocess.run(["git", "worktree", "add", "--detach", "--quiet", str(tree), commit], cwd=ROOT,
                               capture_output=True, text=True)
        if added.returncode != 0:
            raise RuntimeError(f"git worktree add failed: {added.stderr.strip()}")
        yield tree
    finally:
        removed = subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)
        if removed.returncode != 0:  # half made: forget it now that its folder is gone
            subprocess.run(["git", "worktree", "prune"], cwd=ROOT, capture_output=True)


def run_in(tree: Path, name: str, argv: list[str], out: Path, extensions: Path | None = None) -> dict:
    """One run of benchmark `name` with the code of `tree`, in a fresh process; its results.
    extensions: where that process builds and caches the compiled CPU kernels (TORCH_EXTENSIONS_DIR),
    None: this process's place."""
    others = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry and Path(entry).resolve() != ROOT]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), *others])}
    if extensions is not None:
        env["TORCH_EXTENSIONS_DIR"] = str(extensions)
    done = subprocess.run([sys.executable, "-m", "benchmarks", name, *argv, "--out", str(out)], cwd=tree, env=env,
                          stdout=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError(f"the run in {tree} exited with status {done.returncode}")
    return read_json(out)


def cell_key(cell: dict) -> str:
    return json.dumps(cell, sort_keys=True)


def best_per_cell(runs: list[dict]) -> list[dict]:
    """The rows of several runs of the same benchmark, merged: one row per cell, each of its
    measures the least over the runs that measured it (noise only ever adds time and bytes)."""
    best: dict[str, dict] = {}
    for run in runs:
        for row in run["rows"]:
            merged = best.setdefault(cell_key(row["cell"]), {"cell": row["cell"]})
            for measure, number in measures(row).items():
                merged[measure] = min(number, merged.get(measure, number))
    return list(best.values())


def compare_rows(current: list[dict], base: list[dict]) -> list[dict]:
    """One row per cell measured on both sides: each shared measure current, base_ and _ratio
    (current / base: below 1 is faster or smaller here)."""
    rows = []
    for row in current:
        other = find_row(base, **row["cell"])
        if other is None:
            continue
        compared = {"cell": row["cell"]}
        for measure, number in measures(row).items():
            if measure in measures(other):
                compared |= {measure: number, f"base_{measure}": other[measure],
                             f"{measure}_ratio": number / other[measure] if other[measure] else None}
        rows.append(compared)
    return rows


def compare(name: str, rev: str, commit: str, current_runs: list[dict], base_runs: list[dict]) -> dict:
    current, base = best_per_cell(current_runs), best_per_cell(base_runs)
    keys = {side: {cell_key(row["cell"]) for row in rows} for side, rows in (("current", current), ("base", base))}
    return {
        "benchmark": name, "config": current_runs[0]["config"], "context": current_runs[0]["context"],
        "base": {"rev": rev, "commit": commit, "config": base_runs[0]["config"], "context": base_runs[0]["context"]},
        "passes": len(current_runs), "rows": compare_rows(current, base),
        "only_current": [row["cell"] for row in current if cell_key(row["cell"]) not in keys["base"]],
        "only_base": [row["cell"] for row in base if cell_key(row["cell"]) not in keys["current"]],
    }


def formatted(measure: str, number: float | None) -> str:
    if measure.endswith("bytes"):
        return mib(number)
    return ms(number, 2) if measure == "seconds" else f"{number:g}"


def render_comparison(data: dict) -> str:
    """The A/B table: a row per cell, its labels, then current, base and current / base of each measure."""
    rows = data["rows"]
    labels = list(dict.fromkeys(key for row in rows for key in row["cell"]))
    measured = list(dict.fromkeys(key for row in rows for key in row if key != "cell" and not key.startswith("base_")
                                  and not key.endswith("_ratio")))
    unit = {"seconds": "ms", "peak_bytes": "MiB"}
    head = labels + [f"{measure} {side}" + (f" {unit[measure]}" if measure in unit else "")
                     for measure in measured for side in ("current", "base")]
    head += [f"{measure} current / base" for measure in measured]
    table = []
    for row in rows:
        cells = [str(row["cell"].get(label, "")) for label in labels]
        cells += [formatted(measure, row.get(key)) if key in row else ""
                  for measure in measured for key in (measure, f"base_{measure}")]
        cells += [f"{row[f'{measure}_ratio']:.3f}" if row.get(f"{measure}_ratio") is not None else "" for measure in measured]
        table.append(cells)
    base = data["base"]
    lines = [f"{data['benchmark']}: current tree against {base['rev']} ({base['commit'][:10]}), best of "
             f"{data['passes']} alternating passes per side",
             f"current: {context_line(data)}",
             f"base: {context_line({'context': base['context'], 'config': base['config'], 'rows': []})}", "",
             markdown_table(head, table)]
    for side in ("only_current", "only_base"):
        if data[side]:
            lines += ["", f"cells measured {side.replace('_', ' ')}: {len(data[side])}"]
    return "\n".join(lines)


def run_against_base(benchmark: Benchmark, args: argparse.Namespace, argv: list[str]) -> int:
    """`python -m benchmarks NAME --base REV ...`: the exit status (2 where REV cannot be compared)."""
    commit = git("rev-parse", "--verify", "--quiet", f"{args.base}^{{commit}}")
    if commit is None:
        print(f"--base {args.base}: not a revision of a git checkout at {ROOT}", file=sys.stderr)
        return 2
    if git("cat-file", "-e", f"{commit}:{RUNNER}") is None:
        print(f"--base {args.base} ({commit[:10]}) predates the benchmark runner: it has no {RUNNER}", file=sys.stderr)
        return 2
    sides_argv = without_base_options(argv)
    runs: dict[str, list[dict]] = {"base": [], "current": []}
    try:
        with terminate_as_exit(), temporary_worktree(commit) as base_tree, tempfile.TemporaryDirectory() as scratch:
            # The base tree's kernels build in a place of their own: one cache shared by two source
            # trees would rebuild at every switch (torch keys a build by its sources' paths too).
            sides = (("base", base_tree, base_tree.parent / "torch_extensions"), ("current", ROOT, None))
            for index in range(args.passes):
                for side, tree, extensions in sides:
                    runs[side].append(run_in(tree, benchmark.name, sides_argv, Path(scratch) / f"{side}-{index}.json",
                                             extensions))
                    print(f"pass {index + 1}/{args.passes}: {side} done", file=sys.stderr, flush=True)
    except RuntimeError as error:
        print(f"--base {args.base}: {error}", file=sys.stderr)
        return 1
    data = compare(benchmark.name, args.base, commit, runs["current"], runs["base"])
    path = args.out or RESULTS / "ab" / f"{benchmark.name}.json"
    write_json(path, data)
    print(render_comparison(data))
    print(f"wrote {path}", file=sys.stderr)
    return 0
