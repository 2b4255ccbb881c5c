"""`layerzoo compare`: runs and sweeps side by side, as one table (Markdown), its numbers (JSON) and
one figure (PNG).

A group is what a row and a line stand for: a plain run folder alone, or the runs of one sweep grid
point, which differ only in their seed. Each group's metric at each context length (or step) is the
mean over its runs with the min-max band, beside the final training and validation loss, tokens per
second and the state per sequence at the longest length compared.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import ComparisonError
from .compare_plot import plot_comparison
from ..runs.results import FP32_BYTES, Curve, RunResults
from .plan import read_manifest

HEADINGS = {
    "niah": "accuracy (%) of the length x depth grid, mean over depths, against context length",
    "perplexity": "perplexity over the first L tokens of held-out text, against context length L",
    "loss": "training loss (the figure: against the step)",
}


def compare(folders: list[str | Path], metric: str | None = None, window: int | None = None) -> dict:
    """The comparison of run and sweep folders on `metric` (None: the first run's default, see
    RunResults.default_metric) at test window `window` (None: each run's own). A plain run
    without the metric's results is an error; a sweep's run without them (failed, unfinished) is
    left out and listed under "skipped"."""
    entries = gather([Path(folder) for folder in folders])
    groups, skipped = [], []
    for label, run_dirs, from_sweep in entries:
        members = []
        for run_dir in run_dirs:
            try:
                run = RunResults.read(run_dir)
                metric = metric or run.default_metric()
                members.append((run, run.curve(metric, window), run.curve("loss")))
            except ComparisonError as error:
                if not from_sweep:
                    raise
                skipped.append({"run": str(run_dir), "why": str(error)})
        if members:
            groups.append(summarise(label, members, metric, window))
    if not groups:
        why = f": {skipped[0]['why']}" if skipped else ""
        raise ComparisonError(f"no run in {', '.join(map(str, folders))} has results to compare{why}")
    return {"metric": metric, "window": window, "groups": groups, "skipped": skipped}


def gather(folders: list[Path]) -> list[tuple[str, list[Path], bool]]:
    """(label, run folders, from a sweep) per group: a run folder alone, each grid point of a sweep
    (sweep.json) with its seeds, or one grid point named SWEEP/GROUP. Labels name the sweep too
    when several folders are compared."""
    names = [folder.name for folder in folders]
    entries = []
    for folder in folders:
        if not folder.is_dir():
            entries.append(grid_point(folder))
            continue
        name = folder.name if names.count(folder.name) == 1 else str(folder)
        manifest = read_manifest(folder)
        if manifest is None:
            entries.append((name, [folder], False))
            continue
        points: dict[str, list[Path]] = {}
        for run in manifest["runs"]:
            points.setdefault(run["group"], []).append(folder / run["name"])
        for group, run_dirs in points.items():
            label = "/".join(part for part in (name if len(folders) > 1 or not group else "", group) if part)
            entries.append((label, run_dirs, True))
    return entries


def grid_point(folder: Path) -> tuple[str, list[Path], bool]:
    """SWEEP/GROUP, one grid point of a sweep (its seeds) named as if it were a folder of the sweep:
    how one point of a sweep is compared beside other sweeps and runs."""
    manifest = read_manifest(folder.parent) if folder.parent.is_dir() else None
    if manifest is None:
        raise ComparisonError(f"{folder}: no such folder")
    run_dirs = [folder.parent / run["name"] for run in manifest["runs"] if run["group"] == folder.name]
    if not run_dirs:
        groups = sorted({run["group"] for run in manifest["runs"]})
        raise ComparisonError(f"{folder}: no such folder, nor a grid point of the sweep {folder.parent} "
                              f"(its points: {', '.join(groups)})")
    return f"{folder.parent.name}/{folder.name}", run_dirs, True


def summarise(label: str, members: list[tuple[RunResults, Curve, Curve]], metric: str, window: int | None) -> dict:
    """One group's row: its runs' metric curves (mean, min, max at each x), their loss curves, the
    spread of the final training loss, validation loss and tokens/s, and the state per sequence."""
    runs = [run for run, _, _ in members]
    curves = [curve for _, curve, _ in members]
    first = runs[0]
    longest = first.spec.training.seq_len if metric == "loss" else max(x for curve in curves for x in curve.x)
    test_window = first.test_window(window)
    elements = first.state_size(longest, test_window)
    return {
        "label": label,
        "test_window": test_window,
        "train_length": curves[0].train_length or first.spec.training.seq_len,
        "curve": band(curves),
        "loss_curve": band([loss for _, _, loss in members]),
        "final_loss": spread([run.last("loss") for run in runs]),
        "validation_loss": spread([run.last("eval_loss") for run in runs]),
        "tokens_per_s": spread([run.last("tokens_per_s") for run in runs]),
        "state": {"length": longest, "elements": elements, "bytes": None if elements is None else elements * FP32_BYTES},
        "runs": [{"folder": str(run.folder), "seed": run.spec.training.seed, "x": curve.x, "y": curve.y,
                  "final_loss": run.last("loss"), "validation_loss": run.last("eval_loss"),
                  "tokens_per_s": run.last("tokens_per_s")} for run, curve, _ in members],
    }


def band(curves: list[Curve]) -> dict:
    """{"x", "mean", "min", "max", "runs"}: at each x any curve has, over the curves scored there."""
    xs = sorted({x for curve in curves for x in curve.x})
    columns = [spread([y for curve in curves for at, y in zip(curve.x, curve.y) if at == x]) for x in xs]
    return {"x": xs, **{key: [None if column is None else column[key] for column in columns]
                        for key in ("mean", "min", "max", "runs")}}


def spread(values: list[float | None]) -> dict | None:
    """Mean, min and max of the values that are not None, and how many there are; None if none."""
    present = [value for value in values if value is not None]
    if not present:
        return None
    return {"mean": sum(present) / len(present), "min": min(present), "max": max(present), "runs": len(present)}


def to_markdown(comparison: dict) -> str:
    """The table: one row per group; cells `mean [min, max]` over its runs (the mean alone for one run)."""
    metric, groups = comparison["metric"], comparison["groups"]
    scale, digits = (100, 1) if metric == "niah" else (1, 2)
    lengths = [] if metric == "loss" else sorted({x for group in groups for x in group["curve"]["x"]})
    head = ["run", "seeds", "test window", *map(str, lengths),
            "final loss", "validation loss", "tokens/s", "state length", "state elements", "state (fp32)"]
    rows = []
    for group in groups:
        curve = group["curve"]
        at = {x: {key: curve[key][i] for key in ("mean", "min", "max", "runs")} for i, x in enumerate(curve["x"])}
        state = group["state"]
        rows.append([group["label"], str(len(group["runs"])), str(group["test_window"] or "spec"),
                     *(cell(at.get(length), digits, scale) for length in lengths),
                     cell(group["final_loss"], 3), cell(group["validation_loss"], 3), cell(group["tokens_per_s"], 0),
                     str(state["length"]), "-" if state["elements"] is None else f"{state['elements']:,}",
                     "-" if state["bytes"] is None else human_bytes(state["bytes"])])
    lines = [f"{HEADINGS[metric]}; cells: mean [min, max] over a group's seeds", "",
             "| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    lines += [f"skipped {item['run']}: {item['why']}" for item in comparison["skipped"]]
    return "\n".join(lines) + "\n"


def cell(stats: dict | None, digits: int, scale: float = 1) -> str:
    if stats is None or stats["mean"] is None:
        return "-"
    mean, low, high = (f"{scale * stats[key]:,.{digits}f}" for key in ("mean", "min", "max"))
    return mean if stats["runs"] == 1 else f"{mean} [{low}, {high}]"


def human_bytes(count: int) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count} B"


def write_comparison(comparison: dict, prefix: str | Path) -> list[Path]:
    """Write PREFIX.md, PREFIX.json and PREFIX.png; returns their paths."""
    prefix = Path(prefix)
    prefix.parent.mkdir(parents=True, exist_ok=True)
    markdown, data, figure = (prefix.with_name(prefix.name + suffix) for suffix in (".md", ".json", ".png"))
    markdown.write_text(to_markdown(comparison))
    data.write_text(json.dumps(comparison, indent=1))
    plot_comparison(comparison, figure)
    return [markdown, data, figure]
