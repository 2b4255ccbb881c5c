"""The errors of training runs, sweeps and comparisons that cannot go on as asked (one line, for the CLI)."""

from __future__ import annotations

from ..errors import LayerzooError


class TrainingError(LayerzooError):
    """A training run that cannot start or go on as configured."""


class ComparisonError(LayerzooError):
    """A sweep or comparison that cannot go as asked: a malformed --grid, a folder that is neither
    a run nor a sweep, a metric a run has no results for."""
