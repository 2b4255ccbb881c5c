"""The tiny conversion folders these tests read (tests/helpers/conversion.py: distill_folders)."""

import pytest

from tests.helpers.conversion import distill_folders


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    return distill_folders(tmp_path_factory.mktemp("distill-cli"))
