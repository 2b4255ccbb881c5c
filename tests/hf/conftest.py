"""The shipped tiny specs a transformers model can be made of (every one but ARMT), as models."""

import pytest
import torch

import layerzoo
from layerzoo.hf import LayerzooForCausalLM

TINY = [name for name in layerzoo.shipped_specs() if name.endswith("-tiny") and layerzoo.load_spec(name).armt is None]


@pytest.fixture(scope="module", params=TINY)
def hf_model(request) -> LayerzooForCausalLM:
    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec(request.param).eval()


@pytest.fixture(scope="module")
def swax() -> LayerzooForCausalLM:
    """One hybrid (SWA and mLSTM) for the tests that are about transformers' side, not the mixers."""
    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec("swax-tiny").eval()


def prompts(lengths: list[int], vocab: int, seed: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(1, vocab, (length,), generator=generator) for length in lengths]
