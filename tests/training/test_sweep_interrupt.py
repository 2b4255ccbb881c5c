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


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="finds left-over runs through Linux's /proc")
@pytest.mark.parametrize("signum, target", [(signal.SIGTERM, "sweep"), (signal.SIGTERM, "group"), (signal.SIGINT, "group")])
def test_a_signal_stops_the_running_runs_at_a_checkpoint_and_starts_no_more(signum, target, tiny_spec, tmp_path):
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "layerzoo", "sweep", str(tiny_spec), "--seeds", "2", "--jobs", "1",
               "--out", str(out), "--set", f"training.steps={STEPS}"]
    sweep = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    running = out / "seed=3"
    while not (running / "metrics.jsonl").is_file() or (running / "metrics.jsonl").read_text().count("\n") < 2:
        assert sweep.poll() is None, sweep.communicate()
        time.sleep(0.05)
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
