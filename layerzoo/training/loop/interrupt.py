"""SIGINT (Ctrl-C) and SIGTERM during training: finish the step, save a checkpoint, stop.

While a StopSignals block is active the first such signal is only noted; the loop reads
`received` after each step. The handlers are then back to what they were, so a second
signal acts at once as it normally would (Ctrl-C twice: stop without waiting for the step).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped by a signal after saving a checkpoint. A KeyboardInterrupt, so code that
    handles Ctrl-C handles it; `exit_code` is the shell's 128 + signal number."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class StopSignals:
    """Notes SIGINT and SIGTERM instead of acting on them (only in the main thread, the only
    one that can handle signals; elsewhere it notes nothing)."""

    def __init__(self):
        self.received: signal.Signals | None = None
        self.previous: dict[int, object] = {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            self.previous = {signum: signal.signal(signum, self.note) for signum in SIGNALS}
        return self

    def __exit__(self, *exc_info) -> None:
        self.restore()

    def note(self, signum: int, frame: FrameType | None) -> None:
        self.received = signal.Signals(signum)
        self.restore()

    def restore(self) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
