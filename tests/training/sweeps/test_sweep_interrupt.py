"""SIGTERM or SIGINT to a running `layerzoo sweep` (a real process, a real signal), sent to the
sweep alone or to its process group (as Ctrl-C is): each running run gets it once, saves a checkpoint and stops, no waiting
run starts, and no run is left training when the sweep has exited."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.run_checks import checkpoint_steps

STEPS = 2000  # far more than run before the signal


def processes_naming(folder: Path) -> list[str]:
    """The pids of live processes whose command line names `folder` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().decode(errors="replace")
        except OSError:  # ended while listed
            continue
        if str(folder) in command:
            found.append(entry.name)
    return found


def start_sweep(spec, out: Path, seeds: int = 2) -> subprocess.Popen:
    """A `layerzoo sweep` of `seeds` long runs, one at a time, returned once its first run
    (<out>/seed=3) has logged two steps."""
    command = [sys.executable, "-m", "layerzoo", "sweep", str(spec), "--seeds", str(seeds), "--jobs", "1",
               "--out", str(out), "--set", f"training.steps={STEPS}"]
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    log = out / "seed=3" / "metrics.jsonl"
    while not log.is_file() or log.read_text().count("\n") < 2:
        assert sweep.poll() is None, sweep.communicate()
        time.sleep(0.05)
    return sweep


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds left-over runs through Linux's /proc")
@pytest.mark.parametrize("signum, target", [(signal.SIGTERM, "sweep"), (signal.SIGTERM, "group"), (signal.SIGINT, "group")])
def test_a_signal_stops_the_running_runs_at_a_checkpoint_and_starts_no_more(signum, target, tiny_spec, tmp_path):
    out = tmp_path / "sweep"
    sweep = start_sweep(tiny_spec, out)
    running = out / "seed=3"
    if target == "sweep":
        sweep.send_signal(signum)
    else:  # the sweep leads its own group here, so this reaches the sweep and whatever shares its group
        os.killpg(sweep.pid, signum)
    output, error = sweep.communicate(timeout=300)
    assert sweep.returncode == 128 + signum, error
    assert error.strip().splitlines()[-1] == (f"layerzoo: sweep stopped by {signum.name}; a checkpoint saved by: seed=3; "
                                              "runs not started: 1; the same command resumes the sweep")
    (step,) = checkpoint_steps(running)
    assert 2 <= step < STEPS
    assert f"interrupted by {signum.name} after step {step}" in (running / "train.log").read_text()
    assert "[1/2] seed=3: stopped by the signal after" in output and not (out / "seed=4").exists()
    assert processes_naming(out) == []


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds left-over runs through Linux's /proc")
def test_a_sweep_killed_without_warning_leaves_no_run_training(tiny_spec, tmp_path):
    """SIGKILL gives the sweep no chance to pass a signal on: its runs stop by themselves, at a checkpoint."""
    out = tmp_path / "sweep"
    sweep = start_sweep(tiny_spec, out)
    sweep.kill()
    sweep.communicate()
    deadline = time.monotonic() + 300
    try:
        while processes_naming(out):
            assert time.monotonic() < deadline, "a run still trains after its sweep was killed"
            time.sleep(0.05)
    finally:
        for pid in processes_naming(out):  # the test's own orphans, when it fails
            os.kill(int(pid), signal.SIGKILL)
    (step,) = checkpoint_steps(out / "seed=3")
    assert 2 <= step < STEPS and f"interrupted by SIGTERM after step {step}" in (out / "seed=3" / "train.log").read_text()
