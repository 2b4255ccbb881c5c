"""A sweep's `layerzoo train` processes, and how a stop signal reaches them.

Each run starts in its own session, so SIGINT and SIGTERM reach it only through the sweep: while
a RunProcesses block is active, such a signal to the sweep (Ctrl-C, `kill PID`, or `kill` of the
sweep's process group) is passed once to every running run, which saves a checkpoint and stops,
and no further run starts. Runs in the sweep's own group would get a group's signal twice (and
stop at the second without saving), and a signal to the sweep alone would orphan them, still
training in folders that a rerun of the sweep trains again. A second signal is passed on too: the
runs then stop at once, as `layerzoo train` does on a second Ctrl-C.

A sweep killed without warning (SIGKILL) passes nothing on: each run watches for its sweep's end
itself (follow_sweep) and then stops as on SIGTERM, at a checkpoint.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from types import FrameType

from ..loop.interrupt import StopSignals

SWEEP_PID = "LAYERZOO_SWEEP_PID"  # in a run's environment: the sweep it ends with
POLL_SECONDS = 1.0


class RunProcesses(StopSignals):
    """Starts and waits for run processes from worker threads; passes each stop signal to them
    (where StopSignals notes only the first). `received`: the signal that stopped the sweep."""

    def __init__(self):
        super().__init__()
        self.lock = threading.RLock()  # reentrant: a second signal may come while the first is passed on
        self.running: set[subprocess.Popen] = set()

    def run(self, command: list[str], **popen_options) -> int | None:
        """Run `command` to its end and return its exit code; None, without starting it, once
        the sweep has been told to stop."""
        with self.lock:
            if self.received is not None:
                return None
            env = {**popen_options.pop("env", os.environ), SWEEP_PID: str(os.getpid())}
            process = subprocess.Popen(command, start_new_session=True, env=env, **popen_options)
            self.running.add(process)
        try:
            return process.wait()
        finally:
            with self.lock:
                self.running.discard(process)

    def note(self, signum: int, frame: FrameType | None) -> None:
        with self.lock:
            self.received = signal.Signals(signum)
            for process in self.running:
                process.send_signal(signum)


def follow_sweep() -> None:
    """In a run that a sweep started: send this process SIGTERM once the sweep is gone (it then
    stops at a checkpoint, or at once before training). A thread watches the parent's pid, which
    works wherever Python does, unlike Linux's PR_SET_PDEATHSIG. Outside a sweep: nothing."""
    sweep = os.environ.pop(SWEEP_PID, None)  # not inherited by this run's own children
    if sweep is not None:
        threading.Thread(target=stop_when_orphaned, args=(int(sweep),), name="layerzoo-follow-sweep", daemon=True).start()


def stop_when_orphaned(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)
