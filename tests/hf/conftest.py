"""Models of the shipped tiny specs, as transformers models."""

import pytest
import torch

from layerzoo.hf import LayerzooForCausalLM

from tests.helpers.hf_inputs import TINY


@pytest.fixture(scope="module", params=TINY)
def hf_model(request) -> LayerzooForCausalLM:
    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec(request.param).eval()


@pytest.fixture(scope="module")
def swax() -> LayerzooForCausalLM:
    """One hybrid (SWA and mLSTM) for the tests that are about transformers' side, not the mixers."""
    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec("swax-tiny").eval()
