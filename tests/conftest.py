"""Hypothesis profiles: `ci` (default, quick) and `thorough` (HYPOTHESIS_PROFILE=thorough, local runs,
which also run the tests marked slow); a private text cache; `tiny_spec`, the spec with a training
section that the training, CLI and evaluation tests share."""

import os
import textwrap

import pytest
import torch

# Without a GPU the Triton kernels run through the interpreter; Triton reads this when a kernel is
# decorated, and layerzoo imports its Triton modules on first use, so setting it here is early enough.
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from hypothesis import HealthCheck, settings

from tests.helpers.tiny import TINY

settings.register_profile("ci", max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
settings.load_profile(PROFILE)


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory):
    """The text task's cache of the whole session lives in a temporary folder, not ~/.cache."""
    before = os.environ.get("LAYERZOO_CACHE")
    os.environ["LAYERZOO_CACHE"] = str(tmp_path_factory.mktemp("layerzoo-cache"))
    yield
    if before is None:
        os.environ.pop("LAYERZOO_CACHE")
    else:
        os.environ["LAYERZOO_CACHE"] = before


def pytest_collection_modifyitems(config, items):
    """Tests marked slow run with the thorough profile only, so the CI profile stays quick."""
    if PROFILE != "thorough":
        skip = pytest.mark.skip(reason="slow: runs with HYPOTHESIS_PROFILE=thorough")
        for item in items:
            if "slow" in item.keywords:
                item.add_marker(skip)


@pytest.fixture
def tiny_spec(tmp_path):
    """Path of the tiny spec; extra YAML lines (indented under training:) may be appended by tests."""
    path = tmp_path / "tiny.yaml"
    path.write_text(textwrap.dedent(TINY))
    return path
