"""metrics.jsonl: one strict JSON object per line, each with the `step` it belongs to.

Strict JSON means a value that is not a finite number (an eval loss that overflowed) is written
as null, never as the bare NaN or Infinity that Python's json writes and other readers refuse.
A resumed run first drops the records past its checkpoint's step, so that replayed steps are
logged once.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from .space import disk_full, is_disk_full


class MetricsLog:
    """Appends records to `path`, keeping only the existing records of steps <= keep_through
    (0 for a new run: an empty log). A None path (ranks other than 0) writes nothing. Each record
    also goes to the `mirrors` (objects with write(record), e.g. a TensorBoard log)."""

    def __init__(self, path: Path | None, keep_through: int, mirrors: list = ()):
        self.path = path
        self.mirrors = list(mirrors)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            kept = [record for record in read_records(path) if record["step"] <= keep_through]
            partial = path.with_name(path.name + ".partial")  # replaced whole, never half-written
            partial.write_text("".join(strict_line(record) for record in kept))
            os.replace(partial, path)

    def write(self, record: dict[str, Any]) -> None:
        if self.path is not None:
            line = strict_line(record)
            try:
                with self.path.open("a") as file:
                    file.write(line)
            except OSError as error:  # a line cut short is skipped when the log is read
                if is_disk_full(error):
                    raise disk_full(self.path, len(line)) from None
                raise
        for mirror in self.mirrors:
            mirror.write(record)


def read_records(path: Path) -> list[dict[str, Any]]:
    """The records of an existing log that have a step; a line cut short by a crash is skipped,
    and an older version's bare NaN is read (and written back as null)."""
    if not path.exists():
        return []
    records = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("step"), int):
            records.append(record)
    return records


def strict_line(record: dict[str, Any]) -> str:
    return json.dumps(finite_or_null(record), allow_nan=False) + "\n"


def finite_or_null(record: dict[str, Any]) -> dict[str, Any]:
    """The record with each float that is not a finite number replaced by None (JSON null)."""
    return {key: None if isinstance(value, float) and not math.isfinite(value) else value
            for key, value in record.items()}
