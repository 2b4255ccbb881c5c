"""A sweep's `layerzoo train` processes, and how a stop signal reaches them.

Each run starts in its own session, so SIGINT and SIGTERM reach it only through the sweep: while
a RunProcesses block is active, such a signal to the sweep (Ctrl-C, `kill PID`, or `kill` of the
sweep's process group) is passed once to every running run, which saves a checkpoint and stops,
and no further run starts. Runs in the sweep's own group would get a group's signal twice (and
stop at the second without saving), and a signal to the sweep alone would orphan them, still
training in folders that a rerun of the sweep trains again. A second signal is passed on too: the
runs then stop at once, as `layerzoo train` does on a second Ctrl-C.
"""

from __future__ import annotations

import signal
import subprocess
import threading
from types import FrameType

from ..loop.interrupt import StopSignals


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
            process = subprocess.Popen(command, start_new_session=True, **popen_options)
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
