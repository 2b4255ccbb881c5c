"""The error a layerzoo model that vLLM cannot serve raises, in one line."""

from ...errors import LayerzooError


class ServingError(LayerzooError, ValueError):
    """A model or a vLLM setting that layerzoo's vLLM model refuses (the message says why and what to do)."""
