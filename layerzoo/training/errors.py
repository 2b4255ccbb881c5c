"""The error of a training run that cannot start or go on as configured (one line, for the CLI)."""

from __future__ import annotations

from ..errors import LayerzooError


class TrainingError(LayerzooError):
    """A training run that cannot start or go on as configured."""
