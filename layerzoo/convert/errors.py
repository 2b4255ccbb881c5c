"""The error of conversion."""

from ..errors import LayerzooError


class ConvertError(LayerzooError, ValueError):
    """A teacher folder, pattern or output folder that cannot be converted, in one line; raised
    before any weight is allocated."""
