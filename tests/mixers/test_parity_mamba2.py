"""layerzoo's Mamba-2 mixer against transformers' Mamba2Mixer, the same weights loaded into both.

The counterpart runs its pure-PyTorch functions (tests/helpers/hf_mamba2.py, `torch_path`: the five
kernel names of transformers' modeling_mamba2 rebound to the PyTorch bodies under their
hub/mamba_ssm decorators). Compared at fp32 tolerance: the output, the gradients of the input and
of every mapped parameter, the final conv and SSM states, chunked prefill followed by decoding
(layerzoo's single-token step against transformers' cache path: `causal_conv1d_update` and
`selective_state_update`), and padded batches. The mapping and the differences are in
docs/parity.md, "Mamba-2".
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.mixers import Mamba2
from layerzoo.testing import assert_close, sequence_splits

pytest.importorskip("transformers.models.mamba2.modeling_mamba2")

from tests.helpers.hf_mamba2 import (  # noqa: E402
    MAMBA2, counterpart, new_cache, state_of, torch_path, unsupported_layout,
)
from tests.helpers.parity_mapping import assert_same_layer, check_complete  # noqa: E402

if (reason := unsupported_layout()) is not None:
    pytest.skip(reason, allow_module_level=True)


@pytest.fixture(autouse=True)
def pure_pytorch_counterpart():
    with torch_path():
        yield


@st.composite
def layers(draw) -> tuple[Mamba2, int]:
    """(a small seeded layerzoo Mamba-2, a chunk length for the counterpart drawn on its own)."""
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    d_model = draw(st.sampled_from([8, 16]))
    expand = draw(st.sampled_from([1, 2]))
    head_dim = draw(st.sampled_from([4, 8]))
    n_heads = expand * d_model // head_dim
    mixer = Mamba2(d_model, head_dim=head_dim, d_state=draw(st.sampled_from([2, 4, 8])), expand=expand,
                   n_groups=draw(st.sampled_from([g for g in (1, 2, 4) if n_heads % g == 0])),
                   conv_size=draw(st.integers(1, 4)), chunk_size=draw(st.sampled_from([4, 8, 64])))
    return mixer, draw(st.sampled_from([4, 8, 256]))


def inputs(draw, d_model: int, max_length: int = 20) -> torch.Tensor:
    generator = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    return torch.randn(draw(st.integers(1, 2)), draw(st.integers(1, max_length)), d_model, generator=generator)


def assert_same_state(ours, theirs, what: str) -> None:
    assert_close(ours.conv, theirs.conv, what=f"{what}: conv state")
    assert_close(ours.ssm, theirs.ssm, what=f"{what}: ssm state", scale=10)


def test_the_mapping_names_every_parameter_of_both():
    mixer = Mamba2(16, head_dim=8, d_state=4, n_groups=2)
    hf = counterpart(mixer)
    check_complete(mixer, hf, MAMBA2)
    assert hf.conv1d.weight.shape == (mixer.conv_dim, 1, 4) and mixer.conv1d.weight.shape == (mixer.conv_dim, 4)
    assert torch.equal(hf.conv1d.weight[:, 0], mixer.conv1d.weight)


@given(layer=layers(), data=st.data())
def test_outputs_states_and_gradients_equal_transformers(layer, data):
    mixer, hf_chunk = layer
    hf = counterpart(mixer, hf_chunk)
    x = inputs(data.draw, mixer.d_model)
    # no cache, training mode: the fused shortcut's PyTorch body declines
    assert_same_layer(mixer, hf, MAMBA2, x, lambda x_ours, x_theirs: (mixer(x_ours), hf(x_theirs)),
                      what="Mamba-2 vs Mamba2Mixer")
    cache = new_cache()
    with torch.no_grad():
        ours, state = mixer(x, return_state=True)
        assert_close(ours, hf(x, cache=cache), what="output with a cache")
    assert_same_state(state, state_of(cache), "final")


@given(layer=layers(), data=st.data())
def test_chunked_prefill_then_decoding_equals_transformers_cache_path(layer, data):
    """Prefill in up to three pieces (transformers: a cache-carrying chunk scan and conv from its
    conv state), then token by token (transformers: causal_conv1d_update and selective_state_update)."""
    mixer, hf_chunk = layer
    hf = counterpart(mixer, hf_chunk)
    x = inputs(data.draw, mixer.d_model)
    prefill = data.draw(st.integers(1, x.shape[1]))
    pieces = data.draw(sequence_splits(prefill, max_pieces=3)) + [1] * (x.shape[1] - prefill)
    cache, state, start = new_cache(), None, 0
    with torch.no_grad():
        for n, length in enumerate(pieces):
            piece = x[:, start:start + length]
            start += length
            ours, state = mixer(piece, state, return_state=True)
            assert_close(ours, hf(piece, cache=cache), what=f"piece {n} (length {length})", scale=10)
    assert_same_state(state, state_of(cache), f"after pieces {pieces}")


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_batches_equal_transformers_at_the_ends(side):
    """transformers zeroes the padding's inputs (before in_proj and after the conv); with padding at
    either end that equals layerzoo's packing of the real tokens, zeros out at the padding included.
    (Padding inside a row differs by design: docs/parity.md.)"""
    torch.manual_seed(5)
    mixer = Mamba2(16, head_dim=4, d_state=4, n_groups=2, conv_size=4, chunk_size=4)
    hf = counterpart(mixer, 8)
    x = torch.randn(3, 11, 16)
    lengths = torch.tensor([11, 6, 1])
    positions = torch.arange(11)
    mask = positions < lengths[:, None] if side == "right" else positions >= 11 - lengths[:, None]
    with torch.no_grad():
        ours, theirs = mixer(x, attention_mask=mask.long()), hf(x, attention_mask=mask.long())
    assert_close(ours, theirs, what=f"{side}-padded batch")
    assert not theirs[~mask].any()
