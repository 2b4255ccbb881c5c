"""Every registered mixer under bf16 autocast: what its state accumulates over the tokens stays fp32 (a bf16 sum would lose the small updates of long
contexts); what it keeps verbatim (attention's keys and values, a short convolution's last
inputs) may be bf16, since it holds the bf16 values autocast computed, unrounded."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from layerzoo.registry import list_mixers
from layerzoo.testing.conformance import make_mixer
from layerzoo.testing.trees import tensors_in

CACHES = {"k", "v", "conv", "q_conv", "k_conv", "v_conv"}  # state fields that copy inputs, summing nothing


def accumulated(state) -> dict[str, torch.Tensor]:
    """{path: float tensor} of a state's fields that are not caches."""
    found = {}
    for field in dataclasses.fields(state):
        if field.name in CACHES:
            continue
        for index, tensor in enumerate(tensors_in(getattr(state, field.name))):
            if tensor.is_floating_point():
                found[f"{field.name}[{index}]"] = tensor
    return found


@pytest.mark.parametrize("name", list_mixers())
def test_states_stay_fp32_under_bf16_autocast(name):
    mixer = make_mixer(name)
    x = torch.randn(2, 12, 32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        _, state = mixer(x[:, :7], return_state=True)
        _, state = mixer(x[:, 7:], state, return_state=True)  # a state carried in, as a stream does
    narrow = {path: tensor.dtype for path, tensor in accumulated(state).items() if tensor.dtype != torch.float32}
    assert not narrow, f"{name}: state tensors narrower than fp32 under autocast: {narrow}"
