"""The vLLM tests, marked `vllm`: each module skips where vllm is not installed (the main suite's
venv); `.ci/run` runs them in a venv of their own (docs/serving.md). vLLM on CPU, quiet on a shared machine: a 1 GiB
key/value cache, no thread pinning, eager mode, the engine in this process."""

import os

import pytest

os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # a start in seconds fewer, errors raised here
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")


def pytest_collection_modifyitems(items):
    for item in items:
        if item.path.parent.name == "serving":
            item.add_marker(pytest.mark.vllm)
