"""A run's JSON file and the rows in it.

A file holds {"benchmark", "config" (the parsed options), "context" (context.run_context), "rows",
and whatever else the benchmark adds}. Each row is one cell: {"cell": labels, then what was
measured of it: "seconds" (best of the rounds), "peak_bytes", ...}, raw seconds and bytes only,
so that rates and ratios are worked out when tables are rendered and an A/B run can compare any
two files cell by cell.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"


def default_path(name: str, smoke: bool = False) -> Path:
    """benchmarks/results/NAME.json; a smoke run's goes to smoke/ (not committed), so that checking
    a benchmark never overwrites its measured results."""
    return RESULTS / "smoke" / f"{name}.json" if smoke else RESULTS / f"{name}.json"


def write_json(path: Path, data: dict) -> None:
    """Write data to path atomically: a temporary file beside it, then a rename, so that a run
    stopped half way never leaves a torn file for the renderer."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "w") as file:
            json.dump(data, file, indent=1, default=str)
            file.write("\n")
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def find_row(rows: list[dict], **labels) -> dict | None:
    """The row of the cell labelled exactly `labels`, or None where that cell was not run."""
    return next((row for row in rows if row["cell"] == labels), None)


def value(rows: list[dict], measure: str, **labels) -> float | None:
    """One measurement ("seconds", "peak_bytes", ...) of the cell labelled `labels`; None where
    the cell, or that measurement of it, is missing."""
    row = find_row(rows, **labels)
    return None if row is None else row.get(measure)


def measures(row: dict) -> dict[str, float]:
    """What was measured of a row's cell: its numbers, the labels and any error left out."""
    return {key: v for key, v in row.items()
            if key != "cell" and isinstance(v, (int, float)) and not isinstance(v, bool)}
