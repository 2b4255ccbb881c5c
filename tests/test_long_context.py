"""A long stream through the tiny constant-state models: finite outputs, a state that never grows."""

import pytest
import torch

import layerzoo
from layerzoo.testing import state_numel

LENGTH = 65_536
CHUNK = 4096


@pytest.mark.parametrize("name", ["swax-tiny", "swax-gdn-tiny"])
def test_a_65k_token_stream_stays_finite_in_constant_state(name):
    torch.manual_seed(0)
    model = layerzoo.build(name).eval()
    ids = torch.randint(0, model.config.vocab_size, (1, LENGTH))
    state, sizes = None, []
    with torch.no_grad():
        for piece in ids.split(CHUNK, dim=1):
            logits, state = model(piece, state=state, return_state=True)
            assert torch.isfinite(logits).all()
            sizes.append(state_numel(state))
        for token in ids[:, :8].split(1, dim=1):  # then decode on the carried state
            logits, state = model(token, state=state, return_state=True)
            assert torch.isfinite(logits).all()
            sizes.append(state_numel(state))
    assert len(set(sizes)) == 1, f"state size changed along the stream: {sorted(set(sizes))}"
    assert sizes[-1] == model.state_size(LENGTH)
