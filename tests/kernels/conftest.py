"""Fixtures of the kernel tests."""

import pytest

from tests.helpers.hardware_like import nan_filled_allocations as nan_filled


@pytest.fixture(scope="module")
def nan_filled_allocations():
    """torch.empty and friends give NaN-filled tensors in the tests of a module (see hardware_like.py)."""
    with nan_filled():
        yield
