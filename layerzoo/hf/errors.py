"""The error of the Hugging Face layer."""

from ..errors import LayerzooError


class HFError(LayerzooError, ValueError):
    """A folder, config or call that cannot become (or be used as) a transformers model, in one line."""
