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

from .interrupt import SIGNALS


class RunProcesses:
    """Starts and waits for run processes from worker threads; passes stop signals to them."""

    def __init__(self):
        self.lock = threading.RLock()  # reentrant: a second signal may come while the first is passed on
        self.running: set[subprocess.Popen] = set()
        self.stopped_by: signal.Signals | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> RunProcesses:
        if threading.current_thread() is threading.main_thread():  # only it can handle signals
            self.previous = {signum: signal.signal(signum, self.pass_on) for signum in SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}

    def run(self, command: list[str], **popen_options) -> int | None:
        """Run `command` to its end and return its exit code; None, without starting it, once
        the sweep has been told to stop."""
        with self.lock:
            if self.stopped_by is not None:
                return None
            process = subprocess.Popen(command, start_new_session=True, **popen_options)
            self.running.add(process)
        try:
            return process.wait()
        finally:
            with self.lock:
                self.running.discard(process)

    def pass_on(self, signum: int, frame: FrameType | None) -> None:
        with self.lock:
            self.stopped_by = signal.Signals(signum)
            for process in self.running:
                process.send_signal(signum)
