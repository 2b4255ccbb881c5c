"""Two gloo processes under torchrun against one process with the same global batch."""

import json
import os
import subprocess
import sys

import pytest


def losses(run_dir):
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r["loss"] for r in records if "loss" in r]


def run(command, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_two_processes_match_one_with_the_same_global_batch(tiny_spec, tmp_path):
    """Global batch 8: one process in one micro-batch, against two ranks of 4 in two micro-batches
    each, so DDP's gradient averaging and the accumulation are both checked."""
    train = ["-m", "layerzoo.cli", "train", str(tiny_spec), "--no-progress", "--set", "training.steps=4",
             "--set", "training.eval.lengths=[32]"]
    run([sys.executable, *train, "--out", str(tmp_path / "one")], tmp_path)
    run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         *train, "--set", "training.grad_accum=2", "--out", str(tmp_path / "two")], tmp_path)
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert len(one) == len(two) == 4
    assert one == pytest.approx(two, rel=1e-4, abs=1e-5)
