"""The mixer contract, checked over the whole registry: a new mixer is covered by registering it."""

import pytest
import torch
from hypothesis import given, strategies as st

import layerzoo
from layerzoo.testing import (
    assert_close, check_dtypes, check_empty_inputs, check_gradients, check_mixer, check_packing, check_padding,
    check_reentrant, check_shapes, check_state_size, make_mixer, mixer_inputs, mixer_specs, run_in_pieces,
    sequence_splits,
)

MIXERS = layerzoo.list_mixers()
D_MODEL = 32


@pytest.mark.parametrize("name", MIXERS)
def test_every_mixer_passes_check_mixer_against_its_reference_backend(name):
    report = check_mixer(name, reference="reference")
    assert {"causality", "reference", "decoding after a prefill", "init_state", "fp32 precision"} <= set(report.checks)


@pytest.mark.parametrize("name", MIXERS)
@given(data=st.data())
def test_any_split_equals_one_call(name, data):
    mixer = make_mixer(name, D_MODEL)
    x = data.draw(mixer_inputs(D_MODEL, max_length=20))
    pieces = data.draw(sequence_splits(x.shape[1]))
    with torch.no_grad():
        full = mixer(x)
        streamed, _ = run_in_pieces(mixer, x, pieces)
    assert_close(streamed, full, what=f"{name} streamed in {pieces}", scale=10)


@pytest.mark.parametrize("name", MIXERS)
@given(lengths=st.lists(st.integers(1, 12), min_size=1, max_size=3), seed=st.integers(0, 2**16))
def test_padded_and_packed_batches_equal_their_rows_alone(name, lengths, seed):
    """Left- and right-padded batches and cu_seqlens packings, lengths from 1 to past the chunk,
    segment and window sizes of the mixers' test options (so they cross chunk edges), then decoding."""
    mixer = make_mixer(name, D_MODEL)
    x = torch.randn(len(lengths), max(lengths) + 3, D_MODEL, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        check_padding(mixer, x, lengths)
        check_packing(mixer, x, lengths)


@pytest.mark.parametrize("name", MIXERS)
@given(x=mixer_inputs(D_MODEL, max_length=16))
def test_contract(name, x):
    mixer = make_mixer(name, D_MODEL)
    with torch.no_grad():
        check_shapes(mixer, x)
        check_empty_inputs(mixer, x)
        check_reentrant(mixer, x)
        check_state_size(mixer, x)
        check_dtypes(mixer, x)


@pytest.mark.parametrize("name", MIXERS)
def test_gradients_are_finite(name):
    mixer = make_mixer(name, D_MODEL)
    check_gradients(mixer, torch.randn(2, 11, D_MODEL))


@given(spec=mixer_specs(), prompt_length=st.integers(1, 12), seed=st.integers(0, 1000))
def test_generate_equals_greedy_argmax_over_full_forwards(spec, prompt_length, seed):
    torch.manual_seed(seed)
    model = layerzoo.build(spec).eval()
    prompt = torch.randint(0, spec["model"]["vocab_size"], (2, prompt_length))
    generated = model.generate(prompt, 8, prefill_chunk_size=5)
    tokens = prompt
    with torch.no_grad():
        for _ in range(8):
            tokens = torch.cat((tokens, model(tokens)[:, -1].argmax(-1, keepdim=True)), dim=1)
    assert torch.equal(generated, tokens)


@given(spec=mixer_specs(), data=st.data())
def test_model_streaming_equals_one_call(spec, data):
    torch.manual_seed(0)
    model = layerzoo.build(spec).eval()
    ids = torch.randint(0, spec["model"]["vocab_size"], (2, data.draw(st.integers(1, 20))))
    pieces = data.draw(sequence_splits(ids.shape[1]))
    with torch.no_grad():
        full = model(ids)
        streamed, _ = run_in_pieces(model, ids, pieces)
    assert_close(streamed, full, what=f"model streamed in {pieces}", scale=10)
