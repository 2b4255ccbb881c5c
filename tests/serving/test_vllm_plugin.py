"""The entry point vLLM loads in every process imports nothing of layerzoo, torch or transformers."""

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")


def test_the_plugin_is_the_entry_point_and_imports_nothing_heavy():
    (plugin,) = [point for point in entry_points(group="vllm.general_plugins") if point.name == "layerzoo"]
    assert plugin.value == "layerzoo_vllm:register"
    code = ("import sys, layerzoo_vllm; "
            "print(sorted(name for name in sys.modules if name.split('.')[0] in ('layerzoo', 'torch', 'transformers', 'vllm')))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert loaded == "[]"
