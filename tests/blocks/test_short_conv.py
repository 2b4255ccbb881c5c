"""Short causal convolution: against a plain reference, streamed in pieces, and on CUDA backends."""

from __future__ import annotations

import itertools
import sys
import types

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.blocks import ShortConvolution, short_conv
from layerzoo.blocks.short_conv import choose_short_conv_backend
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
    assert choose_short_conv_backend(x, 4) == "torch"
    with pytest.raises(ValueError, match=r"unknown short convolution backend 'tourch'; did you mean 'torch'\?"):
        choose_short_conv_backend(x, 4, "tourch")
    with pytest.raises(ValueError, match=r"'fla' short convolution backend needs CUDA"):
        choose_short_conv_backend(x, 4, "fla")
    with pytest.raises(ValueError, match=r"activation must be one of"):
        ShortConvolution(8, 4, activation="gelu")
    with pytest.raises(ValueError, match=r"width must be >= 1"):
        ShortConvolution(8, 0)


def reference_packed(x, weight, bias, activation, states, offsets):
    """Packed sequences one at a time through reference_conv: (y (1, T, C), final states (N, width - 1, C))."""
    outputs, finals = [x[:, :0]], []
    for index, (start, end) in enumerate(itertools.pairwise(offsets)):
        history = torch.cat((states[index:index + 1], x[:, start:end]), dim=1)
        if end > start:
            outputs.append(reference_conv(x[:, start:end], weight, bias, activation, states[index:index + 1]))
        finals.append(history[:, history.shape[1] - states.shape[1]:])
    return torch.cat(outputs, dim=1), torch.cat(finals)


@st.composite
def packed_conv_case(draw):
    """(conv, x (1, T, C), lengths, initial state (N, width - 1, C) or None), lengths 0 to 9 and often 1."""
    conv, _ = draw(conv_case())
    lengths = draw(st.lists(st.one_of(st.just(1), st.integers(0, 9)), min_size=1, max_size=4))
    x = torch.randn(1, sum(lengths), conv.channels, dtype=torch.float64)
    state = torch.randn(len(lengths), conv.width - 1, conv.channels, dtype=torch.float64) if draw(st.booleans()) else None
    return conv.double(), x, lengths, state


@given(case=packed_conv_case())
def test_a_packed_call_equals_one_call_per_sequence(case):
    """Outputs, final states (a short sequence keeps the older part of its state row) and the
    gradients of the input, the state, the weight and the bias."""
    conv, x, lengths, state = case
    offsets = [0, *itertools.accumulate(lengths)]
    leaves = {name: t for name, t in zip(("x", "state", "weight", "bias"), (x, state, conv.weight, conv.bias))
              if t is not None}

    def grads(y, final):
        """Gradients of every leaf, zeros where none reaches it (no token and no state: nothing does)."""
        gen = torch.Generator().manual_seed(0)
        loss = sum((t * torch.randn(t.shape, generator=gen, dtype=t.dtype)).sum() for t in (y, final))
        wanted = [t.requires_grad_() for t in leaves.values()]
        found = torch.autograd.grad(loss, wanted, allow_unused=True) if loss.requires_grad else [None] * len(wanted)
        return [torch.zeros_like(t) if grad is None else grad for grad, t in zip(found, wanted)]

    y, final = conv(x.requires_grad_(), state if state is None else state.requires_grad_(), cu_seqlens=torch.tensor(offsets))
    states = conv.init_state(len(lengths), x.dtype) if state is None else state
    expected, expected_final = reference_packed(x, conv.weight, conv.bias, conv.activation, states, offsets)
    assert_close(y, expected, what="output")
    assert_close(final, expected_final, what="final states")
    for name, got, want in zip(leaves, grads(y, final), grads(expected, expected_final)):
        assert_close(got, want, what=f"d{name}")


@pytest.mark.parametrize("kwargs,match", [
    ({"cu_seqlens": torch.tensor([0, 2, 5])}, r"ShortConvolution: cu_seqlens must run from 0 to T = 6"),
    ({"cu_seqlens": torch.tensor([0.0, 6.0])}, r"ShortConvolution: cu_seqlens must be a 1-D int32 or int64 tensor"),
    ({"cu_seqlens": torch.tensor([0, 6]), "state": torch.zeros(2, 2, 4)},
     r"ShortConvolution: with cu_seqlens the initial state holds one row per sequence: 1, got 2"),
])
def test_malformed_packed_calls_get_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        ShortConvolution(4, 3)(torch.zeros(1, 6, 4), **kwargs)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match=r"the batch size must be 1, got 2"):
        ShortConvolution(4, 3)(torch.zeros(2, 6, 4), cu_seqlens=torch.tensor([0, 6]))


def test_cuda_adapters_hand_their_libraries_packed_sequences(monkeypatch):
    """The "causal_conv1d" and "fla" paths, with stand-ins of the libraries' signatures that run
    reference_conv (the libraries run on CUDA only: the real ones are checked by the gpu test
    below): seq_idx from the empty state with the final states gathered from the inputs, and fla's
    cu_seqlens with its (N, C, width) cache, empty sequences left out."""
    conv = ShortConvolution(5, 4, bias=True).double()
    gen = torch.Generator().manual_seed(0)
    offsets = [0, 2, 2, 9, 10]
    x = torch.randn(1, 10, 5, generator=gen, dtype=torch.float64)

    def causal_conv1d_fn(x, weight, bias, seq_idx, activation):
        assert x.stride(1) == 1  # channel-last
        bounds = [0, *torch.bincount(seq_idx[0], minlength=4).cumsum(0).tolist()]
        zeros = torch.zeros(len(bounds) - 1, weight.shape[1] - 1, x.shape[1], dtype=x.dtype)
        return reference_packed(x.transpose(1, 2), weight, bias, activation, zeros, bounds)[0].transpose(1, 2)

    def causal_conv1d(x, weight, bias, initial_state, output_final_state, activation, backend, cu_seqlens, cu_seqlens_cpu):
        bounds = cu_seqlens_cpu.tolist()
        assert bounds == cu_seqlens.tolist() and all(end > start for start, end in itertools.pairwise(bounds))
        y, final = reference_packed(x, weight, bias, activation, initial_state[..., 1:].transpose(1, 2), bounds)
        return y, F.pad(final.transpose(1, 2), (1, 0), value=float("nan"))  # fla's oldest column is never read

    monkeypatch.setattr(short_conv, "_dao_causal_conv1d", lambda: causal_conv1d_fn)
    monkeypatch.setitem(sys.modules, "fla.modules.causal_conv1d", types.SimpleNamespace(causal_conv1d=causal_conv1d))
    zeros, state = conv.init_state(4, x.dtype), torch.randn(4, 3, 5, generator=gen, dtype=torch.float64)
    with torch.no_grad():
        for name, initial in (("causal_conv1d", zeros), ("fla", zeros), ("fla", state)):
            y, final = short_conv._IMPLEMENTATIONS[name](x, initial, conv.weight, conv.bias, "silu", bounds=offsets)
            expected, expected_final = reference_packed(x, conv.weight, conv.bias, "silu", initial, offsets)
            assert_close(y, expected, what=f"{name} output")
            torch.testing.assert_close(final, expected_final)


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


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["fla", "causal_conv1d", "auto"])
@pytest.mark.parametrize("with_state", [False, True])
def test_cuda_backends_take_packed_sequences(backend, with_state):
    """Packed sequences (one token, an empty one) on CUDA against the packed "torch" convolution
    on CPU: outputs, final states, gradients (causal_conv1d with a state runs "torch" on CUDA)."""
    if backend == "causal_conv1d":
        pytest.importorskip("causal_conv1d")
    torch.manual_seed(0)
    conv = ShortConvolution(64, 4, bias=True)
    cuda_conv = ShortConvolution(64, 4, bias=True, backend=backend).cuda()
    cuda_conv.load_state_dict(conv.state_dict())
    lengths = [1, 300, 0, 77, 2, 64]
    offsets = torch.tensor([0, *itertools.accumulate(lengths)])
    x = torch.randn(1, sum(lengths), 64)
    state = torch.randn(len(lengths), 3, 64) if with_state else None
    grad_out, grad_state = torch.randn(x.shape), torch.randn(len(lengths), 3, 64)

    def run(module, device):
        leaves = [t.to(device).requires_grad_() for t in (x, state) if t is not None]
        y, final = module(leaves[0], leaves[1] if with_state else None, cu_seqlens=offsets.to(device))
        torch.autograd.backward((y, final), (grad_out.to(device), grad_state.to(device)))
        grads = [t.grad for t in (*leaves, module.weight, module.bias)]
        return [t.cpu() for t in (y, final, *grads)]

    for name, got, want in zip(["y", "final state", "dx", *(["dstate"] if with_state else []), "dweight", "dbias"],
                               run(cuda_conv, "cuda"), run(conv, "cpu")):
        assert_close(got, want, what=f"{backend} packed: {name}", scale=3)
