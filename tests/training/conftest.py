"""A CPU-second-sized spec with a training section, written per test."""

import textwrap

import pytest

from tiny import TINY


@pytest.fixture
def tiny_spec(tmp_path):
    """Path of the tiny spec; extra YAML lines (indented under training:) may be appended by tests."""
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(TINY))
    return path
