"""What a conformance suite says: a one-line report on success, and on failure one error naming the
check and the input it failed on; and the hypothesis settings the suites run under by default."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Iterator

import hypothesis
import torch

from .trees import tensors_in


@dataclass(frozen=True)
class Report:
    """What a suite checked: its call, the checks, how many drawn examples, how long it took.

    Printed, it is one line: "check_mixer('swa'): <n> checks (shapes, ...) passed on <m> drawn
    examples in <s> s", followed by "; skipped: <check> (<why>)" for each check skipped.

    Attributes:
        call: the suite's call, as text.
        checks: the names of the checks that ran (and passed).
        examples: the hypothesis examples drawn.
        seconds: the wall time taken.
        skipped: the checks that could not run on this subject, each with the reason.
    """

    call: str
    checks: list[str]
    examples: int
    seconds: float
    skipped: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        skipped = "".join(f"; skipped: {check} ({why})" for check, why in self.skipped.items())
        return (f"{self.call}: {len(self.checks)} checks ({', '.join(self.checks)}) passed on "
                f"{self.examples} drawn examples in {self.seconds:.1f} s{skipped}")

    def printed(self) -> Report:
        print(self)
        return self


def bounded_settings(max_examples: int | None = None) -> hypothesis.settings:
    """The active profile's settings with max_examples (when given), no deadline and no shrinking:
    shrinking a failure of a whole suite can take minutes on a small machine, and the first
    failing example is reported with its shapes anyway."""
    phases = [phase for phase in hypothesis.settings.default.phases if phase != hypothesis.Phase.shrink]
    return hypothesis.settings(hypothesis.settings.default, deadline=None, phases=phases, report_multiple_bugs=False,
                               max_examples=max_examples or hypothesis.settings.default.max_examples)


class CheckSkipped(Exception):
    """A check that cannot run on its subject (a mixer whose fp64 copy does not run, say): the
    suite goes on, and its report names the check with this exception's message as the reason."""


@contextlib.contextmanager
def failing_check(check: str, example: str) -> Iterator[None]:
    """An exception inside the block becomes one AssertionError: "<check> failed on <example>: <error>"."""
    try:
        yield
    except Exception as error:
        if isinstance(error, AssertionError) and " failed on " in str(error):
            raise  # already named by an inner check
        raise AssertionError(f"{check} failed on {example}: {type(error).__name__}: {error}") from error


def shapes_of(value: Any) -> str:
    """Tensors as their shapes and dtypes: {'q': (2, 5, 2, 8) float32, ...}, or None."""
    if value is None:
        return "None"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{name}: {shapes_of(item)}" for name, item in value.items()) + "}"
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    return "[" + ", ".join(shapes_of(t) for t in tensors_in(value)) + "]"
