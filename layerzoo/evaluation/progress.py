"""A long measure's progress on stderr: a bar of the tokens run through the model, and after its
first step a line with the time the whole measure will take at that pace."""

from __future__ import annotations

import sys
import time

from tqdm.auto import tqdm


class Progress:
    """A tqdm bar (stderr) over `total` tokens named `label`; the first `advance` prints
    "LABEL: about N min for WHAT" from that step's pace. Silent when not `enabled`."""

    def __init__(self, total: int, label: str, what: str, enabled: bool = True):
        self.bar = tqdm(total=total, desc=label, unit=" tokens", unit_scale=True, dynamic_ncols=True, file=sys.stderr,
                        disable=not enabled, leave=False)
        self.label, self.what, self.enabled = label, what, enabled
        self.started = time.monotonic()
        self.estimated = False

    def advance(self, tokens: int) -> None:
        """`tokens` more run through the model; the first call estimates the whole."""
        self.bar.update(tokens)
        if self.enabled and not self.estimated:
            self.estimated = True
            seconds = (time.monotonic() - self.started) * self.bar.total / max(tokens, 1)
            self.bar.write(f"{self.label}: {duration(seconds)} for {self.what} (at the pace of its first "
                           f"{tokens:,} tokens)", file=sys.stderr)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.bar.close()


def duration(seconds: float) -> str:
    """'under a minute', 'about 1 min', 'about 12 min'."""
    return "under a minute" if seconds < 60 else f"about {round(seconds / 60)} min"
