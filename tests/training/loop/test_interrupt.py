"""SIGINT or SIGTERM during `layerzoo train` (a real process, a real signal) saves a checkpoint
and exits cleanly; `--resume` then ends exactly where an uninterrupted run ends, to the bit."""

import json
import signal
import subprocess
import sys
import time

from tests.helpers.run_checks import assert_same_final_state, checkpoint_steps

STEPS = 30


def train_command(spec, run_dir, *extra):
    return [sys.executable, "-m", "layerzoo.cli", "train", str(spec), "--out", str(run_dir), "--no-progress",
            "--set", f"training.steps={STEPS}", *extra]


def logged_steps(run_dir) -> int:
    path = run_dir / "metrics.jsonl"
    return path.read_text().count("\n") if path.exists() else 0


def interrupt(spec, run_dir, signum) -> tuple[int, str]:
    """Start a run, send `signum` once it has logged two steps (most of its steps still to come),
    and return its exit code and stderr."""
    process = subprocess.Popen(train_command(spec, run_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    while logged_steps(run_dir) < 2:
        assert process.poll() is None, process.communicate()[1]
        time.sleep(0.01)
    process.send_signal(signum)
    _, error = process.communicate(timeout=300)
    return process.returncode, error


def test_sigint_keeps_a_checkpoint_and_resume_continues_bit_exactly(tiny_spec, tmp_path):
    whole, interrupted = tmp_path / "whole", tmp_path / "interrupted"
    subprocess.run(train_command(tiny_spec, whole), check=True, capture_output=True, timeout=300)
    code, error = interrupt(tiny_spec, interrupted, signal.SIGINT)
    assert code == 130, error
    (step,) = checkpoint_steps(interrupted)
    assert 2 <= step < STEPS, "the signal came after the run had ended; the test needs more steps"
    assert "Traceback" not in error
    assert error.strip().splitlines()[-1] == (
        f"layerzoo: interrupted by SIGINT after step {step}; saved {interrupted}/checkpoints/step-{step:08d}; "
        "continue with --resume")
    done = subprocess.run(train_command(tiny_spec, interrupted, "--resume"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert_same_final_state(interrupted, whole)
    grids = [json.loads((run / "eval-window16.json").read_text()) for run in (whole, interrupted)]
    assert grids[0] == grids[1]


def test_sigterm_keeps_a_checkpoint(tiny_spec, tmp_path):
    code, error = interrupt(tiny_spec, tmp_path / "run", signal.SIGTERM)
    assert code == 128 + signal.SIGTERM, error
    (step,) = checkpoint_steps(tmp_path / "run")
    assert f"interrupted by SIGTERM after step {step}" in error.strip().splitlines()[-1] and "Traceback" not in error
