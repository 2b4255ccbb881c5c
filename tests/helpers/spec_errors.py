"""The error a spec file is refused with, as the tests of spec errors read it."""

from pathlib import Path

import pytest

from layerzoo import SpecError, load_spec


def assert_spec_error(path: Path, line: int, words: list[str], after: str = "") -> None:
    """load_spec(path) fails in one line that starts with `path:line:` (then `after`) and holds each of `words`."""
    with pytest.raises(SpecError) as error:
        load_spec(path)
    message = str(error.value)
    assert message.startswith(f"{path}:{line}:{after}") and "\n" not in message, message
    for word in words:
        assert word in message, message
