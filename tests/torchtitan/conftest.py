"""The torchtitan tests, marked `torchtitan`: each module skips where torchtitan is not installed
(the main suite's venv); `.ci/run` runs them in a venv of their own (.ci/torchtitan). torchtitan
0.3.0 needs patches to run on CPU (docs/training-at-scale.md lists them): cpu_patches/ holds them as
a sitecustomize that the torchrun processes these tests start find on their PYTHONPATH, and that
this process runs too, before any test imports torchtitan; only where torchtitan is installed, so
the main suite's process is left as it is."""

import importlib.util
import runpy
from pathlib import Path

import pytest

if importlib.util.find_spec("torchtitan") is not None:
    runpy.run_path(str(Path(__file__).parent / "cpu_patches" / "sitecustomize.py"))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent.name == "torchtitan":
            item.add_marker(pytest.mark.torchtitan)
