"""The GPU check's script and its summary (benchmarks/gpu_check.sh); the whole check runs in its
CPU mode in CI (benchmarks/gpu_rehearsal.sh)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.runner.gpu_summary import record

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "gpu_check.sh"
ENVIRONMENT = {**os.environ, "PYTHON": sys.executable}  # the check's Python: this one, with torch


def test_the_summary_says_after_each_stage_how_far_the_check_got(tmp_path):
    summary = tmp_path / "summary.json"
    record(summary, "environment", 0, 1, "environment.json", "gpu")
    assert json.loads(summary.read_text())["passed"]
    record(summary, "tests", 124, 240, "tests.log", "gpu")
    record(summary, "benchmark", 1, 3, "benchmark.log", "gpu")
    written = json.loads(summary.read_text())
    assert [stage["outcome"] for stage in written["stages"]] == ["passed", "timed out", "failed"]
    assert written["mode"] == "gpu" and not written["passed"]


def test_a_skipped_stage_leaves_the_check_passed(tmp_path):
    summary = tmp_path / "summary.json"
    record(summary, "environment", 0, 1, "environment.json", "gpu")
    record(summary, "torchtitan", 77, 2, "torchtitan.log", "gpu")
    written = json.loads(summary.read_text())
    assert written["stages"][-1]["outcome"] == "skipped" and written["passed"]


def test_the_check_needs_an_output_folder():
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, env=ENVIRONMENT)
    assert done.returncode == 2 and "--out DIR is required" in done.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a CUDA machine the check runs")
def test_without_cuda_the_check_says_how_to_rehearse_it(tmp_path):
    done = subprocess.run(["bash", str(SCRIPT), "--out", str(tmp_path / "check")], capture_output=True, text=True, env=ENVIRONMENT)
    assert done.returncode == 2 and "no CUDA device here; rehearse with --cpu" in done.stderr
    assert not (tmp_path / "check" / "summary.json").exists()
