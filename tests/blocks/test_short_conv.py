"""Short causal convolution: against a plain reference, streamed in pieces, and on CUDA backends."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.blocks import ShortConvolution
from layerzoo.blocks.short_conv import choose_conv_backend
from layerzoo.testing import assert_close, sequence_splits


def reference_conv(x, weight, bias, activation, state=None):
    """y_t = act(bias + sum_i weight[:, i] x_{t - width + 1 + i}), x before t = state (or zeros)."""
    batch, length, channels = x.shape
    width = weight.shape[1]
    history = torch.zeros(batch, width - 1, channels) if state is None else state
    padded = torch.cat((history, x), dim=1)
    y = torch.stack([(padded[:, t:t + width] * weight.T).sum(1) for t in range(length)], dim=1)
    y = y + (0 if bias is None else bias)
    return F.silu(y) if activation == "silu" else y


@st.composite
def conv_case(draw):
    channels, width = draw(st.integers(1, 12)), draw(st.integers(1, 5))
    activation, bias = draw(st.sampled_from(["silu", None])), draw(st.booleans())
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    conv = ShortConvolution(channels, width, activation=activation, bias=bias)
    x = torch.randn(draw(st.integers(1, 3)), draw(st.integers(1, 20)), channels)
    return conv, x


@given(case=conv_case(), with_state=st.booleans())
def test_matches_reference_including_the_state(case, with_state):
    conv, x = case
    state = torch.randn(x.shape[0], conv.width - 1, conv.channels) if with_state else None
    with torch.no_grad():
        y, new_state = conv(x, state)
        expected = reference_conv(x, conv.weight, conv.bias, conv.activation, state)
    assert_close(y, expected, what="output")
    history = torch.cat((torch.zeros(x.shape[0], conv.width - 1, conv.channels) if state is None else state, x), 1)
    torch.testing.assert_close(new_state, history[:, history.shape[1] - (conv.width - 1):])


@given(case=conv_case(), data=st.data())
def test_any_split_equals_one_call(case, data):
    conv, x = case
    pieces = data.draw(sequence_splits(x.shape[1]))
    with torch.no_grad():
        full, full_state = conv(x)
        state, outputs = conv.init_state(x.shape[0]), []
        for piece in x.split(pieces, dim=1):
            y, state = conv(piece, state)
            outputs.append(y)
    assert_close(torch.cat(outputs, dim=1), full, what=f"streamed in {pieces}")
    torch.testing.assert_close(state, full_state)


def test_gradients_match_the_reference():
    torch.manual_seed(0)
    conv = ShortConvolution(6, 4, bias=True)
    x, state = torch.randn(2, 7, 6, requires_grad=True), torch.randn(2, 3, 6, requires_grad=True)
    leaves = (x, state, conv.weight, conv.bias)
    grad_out = torch.randn(2, 7, 6)
    actual = torch.autograd.grad(conv(x, state)[0], leaves, grad_out)
    expected = torch.autograd.grad(reference_conv(x, conv.weight, conv.bias, "silu", state), leaves, grad_out)
    for name, got, want in zip(("x", "state", "weight", "bias"), actual, expected):
        assert_close(got, want, what=f"d{name}")


@pytest.mark.parametrize("batch,length", [(2, 0), (0, 5), (0, 0)])
def test_no_tokens_give_an_empty_output_and_keep_the_state(batch, length):
    conv = ShortConvolution(4, 3)
    state = torch.randn(batch, 2, 4)
    y, new_state = conv(torch.randn(batch, length, 4), state)
    assert y.shape == (batch, length, 4)
    torch.testing.assert_close(new_state, state)


def test_the_returned_state_does_not_alias_the_input():
    conv = ShortConvolution(4, 3)
    x = torch.randn(1, 1000, 4)
    _, state = conv(x)
    assert state.untyped_storage().nbytes() == state.numel() * state.element_size()


def test_choose_backend_and_bad_arguments():
    x = torch.zeros(1, 5, 8)
    assert choose_conv_backend(x, 4) == "torch"
    with pytest.raises(ValueError, match=r"unknown short convolution backend 'tourch'; did you mean 'torch'\?"):
        choose_conv_backend(x, 4, "tourch")
    with pytest.raises(ValueError, match=r"'fla' short convolution backend needs CUDA"):
        choose_conv_backend(x, 4, "fla")
    with pytest.raises(ValueError, match=r"activation must be one of"):
        ShortConvolution(8, 4, activation="gelu")
    with pytest.raises(ValueError, match=r"width must be >= 1"):
        ShortConvolution(8, 0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["fla", "causal_conv1d", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_backends_match_torch(backend, dtype):
    if backend == "causal_conv1d":
        pytest.importorskip("causal_conv1d")
    torch.manual_seed(0)
    conv = ShortConvolution(64, 4, bias=True)
    cuda_conv = ShortConvolution(64, 4, bias=True, backend=backend).cuda().to(dtype)
    cuda_conv.load_state_dict(conv.state_dict())
    x, state = torch.randn(2, 37, 64).to(dtype), torch.randn(2, 3, 64).to(dtype)
    expected, expected_state = ShortConvolution.forward(conv.to(dtype), x, state)
    xc, sc = x.cuda().requires_grad_(), state.cuda().requires_grad_()
    y, new_state = cuda_conv(xc, sc)
    assert_close(y.float().cpu(), expected.float(), dtype, what=f"{backend} output", scale=3)
    torch.testing.assert_close(new_state.cpu(), expected_state)
    # streaming: a piece, a decoding step, the rest
    pieces, state_c = [], sc
    for piece in xc.split([20, 1, 16], dim=1):
        out, state_c = cuda_conv(piece, state_c)
        pieces.append(out)
    assert_close(torch.cat(pieces, 1).float().cpu(), expected.float(), dtype, what=f"{backend} streamed", scale=3)
    y.float().sum().backward()
    assert torch.isfinite(xc.grad).all() and torch.isfinite(sc.grad).all()
