"""The one error context parallelism raises on bad input."""

from __future__ import annotations

from ....errors import LayerzooError


class ContextError(LayerzooError, ValueError):
    """A context size or a sequence that cannot be split across a context group; one line."""
