"""The GPU check's record of its stages, rewritten after each one (benchmarks/gpu_check.sh):

    python -m benchmarks.runner.gpu_summary SUMMARY.json STAGE EXIT_CODE SECONDS LOG MODE

so that a check cut short still says how far it got. A stage "passed" (exit 0), "timed out"
(124 or 137: its budget ran out), was "skipped" (77: this machine cannot run it; its log says why)
or "failed". The check passed when every stage passed or was skipped.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .results import write_json

TIMED_OUT = (124, 137)
SKIPPED = 77  # automake's exit status for a test that cannot run where it is


def outcome(exit_code: int) -> str:
    if exit_code == 0:
        return "passed"
    if exit_code == SKIPPED:
        return "skipped"
    return "timed out" if exit_code in TIMED_OUT else "failed"


def record(path: Path, stage: str, exit_code: int, seconds: int, log: str, mode: str) -> dict:
    """The summary at `path` with this stage added (a new summary when there is none)."""
    summary = json.loads(path.read_text()) if path.exists() else {"mode": mode, "stages": []}
    summary["stages"].append({"stage": stage, "outcome": outcome(exit_code), "exit_code": exit_code,
                              "seconds": seconds, "log": log})
    summary["passed"] = all(entry["outcome"] in ("passed", "skipped") for entry in summary["stages"])
    write_json(path, summary)
    return summary


if __name__ == "__main__":
    summary_path, stage_name, code, took, log_name, run_mode = sys.argv[1:]
    record(Path(summary_path), stage_name, int(code), int(took), log_name, run_mode)
