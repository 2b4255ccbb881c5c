"""mLSTM kernel: chunkwise and native against the reference step loop, plus mlstm_kernels.

The kernel contract (streaming, empty inputs, layouts, gradients, bad inputs) is checked by
test_kernel_conformance.py.

The truth is the step loop in fp64 on the very same (possibly bf16-rounded) inputs. In fp64, q and
k take any sign and the match must be exact to rounding. h divides by max(|q . n|, exp(-m)), which
is ill-conditioned where q . n nearly cancels: there any fp32 implementation, the step loop
included, is off by up to 1e-4, and which one errs more is luck. So the fp32 and bf16 cases draw
q, k >= 0 (no cancellation in q . n), where a low-precision kernel must meet its dtype's tolerance.
"""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch
from torch.utils import cpp_extension
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.kernels import MLSTMState, choose_mlstm_backend, mlstm, mlstm_reference
from layerzoo.kernels.common import native_build
from layerzoo.kernels.mlstm import BACKENDS
from layerzoo.kernels.mlstm import native as mlstm_native
from layerzoo.kernels.common.backends import triton_can_run
from layerzoo.testing import assert_close, check_kernel_packed, packed_cases
from layerzoo.testing.families import MLSTM, in_frame

from tests.helpers.kernel_backends import built, running
from tests.helpers.layouts import relayout
from tests.helpers.mlstm_cases import STATE, check_against_truth, mlstm_case

try:  # not a dependency: the cross-check runs where NX-AI's package is installed
    from mlstm_kernels.torch.recurrent.native_sequence import mlstm_recurrent_sequence__native_fw
except ImportError:
    mlstm_recurrent_sequence__native_fw = None

# The chunked CPU backends: PyTorch's, and the compiled forward, which gives way to PyTorch's
# where autograd records the call.
CHUNKED = ("chunkwise", "native")


def check_chunked_against_truth(backend, inputs, state, chunk_size):
    """A chunked backend against the truth (check_against_truth), and its forward without
    autograd too: there "native" runs compiled (native.py)."""
    with running(backend, mlstm_native.COMPILED):
        check_against_truth(backend, inputs, state, chunk_size)
        with torch.no_grad():
            h, final = mlstm(**inputs, initial_state=state, output_final_state=True, chunk_size=chunk_size,
                             backend=backend)
    truth_h, truth = mlstm_reference(**{name: t.double() for name, t in inputs.items()},
                                     initial_state=None if state is None else MLSTMState(*(t.double() for t in state)))
    dtype, what = inputs["q"].dtype, f"{backend} without autograd, chunk {chunk_size}"
    assert h.dtype == dtype and final.C.dtype == torch.promote_types(dtype, torch.float32)
    assert_close(h.double(), truth_h, dtype, what=f"{what}: h")
    for name, got, want in zip(STATE, in_frame(final, truth.m, torch.float64), truth):
        assert_close(got, want, dtype, what=f"{what}: {name}")


@pytest.mark.parametrize("backend", CHUNKED)
@given(case=mlstm_case())
def test_chunked_backends_match_reference_outputs_states_and_gradients(backend, case):
    check_chunked_against_truth(backend, *case)


@pytest.mark.parametrize("backend", CHUNKED)
@given(case=mlstm_case(dtypes=(torch.float32,), extreme_gates=True, max_length=150))
def test_extreme_gates_stay_finite_and_agree(backend, case):
    """Forget gates near 0 and 1, input gates exp(+-30): no overflow, and still the same function."""
    check_chunked_against_truth(backend, *case)  # assert_close also fails on NaN or Inf


@pytest.mark.parametrize("backend", CHUNKED)
@given(case=mlstm_case(padding=True, max_length=150))
def test_padding_tokens_leave_the_state_alone_whole_chunks_included(backend, case):
    """A chunk of nothing but padding (every i = -inf) must carry the state through, not NaN."""
    check_chunked_against_truth(backend, *case)


@pytest.mark.parametrize("backend", CHUNKED)
@given(data=st.data())
def test_packed_sequences_cross_no_boundary_at_realistic_chunk_sizes(backend, data):
    """Packed, the chunked backends lay each sequence from a chunk boundary and restart the loop
    over chunks at each: sequences of up to 150 tokens in chunks of 16 to 64 equal one call per
    sequence (the conformance check runs chunks of at most 16)."""
    case, lengths = data.draw(packed_cases(MLSTM, max_sequences=4, max_length=150))
    case = dataclasses.replace(case, options={"chunk_size": data.draw(st.sampled_from([16, 32, 64]))})
    with running(backend, mlstm_native.COMPILED):
        check_kernel_packed(MLSTM, case, backend, lengths)


@pytest.mark.parametrize("backend", [*CHUNKED, "auto"])
def test_a_forget_gate_of_minus_inf_is_refused_by_chunked_backends(backend):
    q, k, v, i, f = _inputs()
    f[:, 2] = float("-inf")
    with pytest.raises(ValueError, match=r"mlstm: f holds -inf \(a full reset\).*'(chunkwise|native)'") as info:
        mlstm(q, k, v, i, f, backend=backend)
    assert "\n" not in str(info.value)
    assert torch.isfinite(mlstm(q, k, v, i, f, backend="reference")).all()


def test_gradcheck_chunkwise_in_fp64():
    """Analytic gradients of every input, the initial state included, against finite differences."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, 5, 1)  # two chunks of 2 and a padded one
    inputs = [
        torch.randn(*shape, 2, generator=gen), torch.randn(*shape, 2, generator=gen),
        torch.randn(*shape, 3, generator=gen), 3 * torch.randn(shape, generator=gen),
        2 + 2 * torch.randn(shape, generator=gen),
        torch.randn(1, 1, 2, 3, generator=gen), torch.randn(1, 1, 2, generator=gen), torch.randn(1, 1, generator=gen),
    ]
    inputs = [t.double().requires_grad_() for t in inputs]

    def fn(q, k, v, i, f, C, n, m):
        h, final = mlstm(q, k, v, i, f, initial_state=(C, n, m), output_final_state=True, chunk_size=2)
        return h, final.C, final.n, final.m

    assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.skipif(mlstm_recurrent_sequence__native_fw is None, reason="mlstm_kernels is not installed")
@given(case=mlstm_case(dtypes=(torch.float32,), max_length=80))
def test_reference_matches_mlstm_kernels_native_recurrence(case):
    inputs, state, _ = case
    h, final = mlstm_reference(**inputs, initial_state=state)
    heads_first = {name: t.transpose(1, 2) for name, t in inputs.items()}  # theirs: (B, H, T, ...)
    initial = {} if state is None else {"c_initial": state.C, "n_initial": state.n, "m_initial": state.m[..., None]}
    their_h, (C, n, m) = mlstm_recurrent_sequence__native_fw(**heads_first, **initial, return_last_states=True)
    assert_close(h, their_h.transpose(1, 2), what="output vs mlstm_kernels")
    for name, got, want in zip(STATE, final, (C, n, m[..., 0])):
        assert_close(got, want, what=f"final {name} vs mlstm_kernels")


def test_dtypes_state_type_and_return_forms():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 9, 3, 4, generator=gen).bfloat16() for _ in range(3))
    i, f = torch.randn(2, 9, 3, generator=gen), torch.randn(2, 9, 3, generator=gen)
    for backend in BACKENDS:
        if backend == "triton" and not triton_can_run(q):  # CPU tensors need the interpreter
            continue
        h, state = mlstm(q, k, v, i, f, output_final_state=True, backend=backend)
        assert h.dtype == torch.bfloat16 and h.shape == (2, 9, 3, 4)
        assert isinstance(state, MLSTMState) and all(t.dtype == torch.float32 for t in state)
        assert [tuple(t.shape) for t in state] == [(2, 3, 4, 4), (2, 3, 4), (2, 3)]
    assert isinstance(mlstm(q, k, v, i, f), torch.Tensor)
    as_tuple = mlstm(q, k, v, i, f, initial_state=tuple(state))
    assert torch.equal(as_tuple, mlstm(q, k, v, i, f, initial_state=state))
    _, fp64_state = mlstm(*(t.double() for t in (q, k, v, i, f)), output_final_state=True)
    assert fp64_state.C.dtype == torch.float64


def test_choose_backend():
    q = torch.zeros(1, 4, 2, 8)
    built(mlstm_native.COMPILED)
    assert choose_mlstm_backend(q) == "native"
    assert choose_mlstm_backend(q, differentiable=True) == "chunkwise"  # the compiled kernel is a forward
    assert choose_mlstm_backend(q[:, :1]) == "reference"  # one step: decoding
    assert choose_mlstm_backend(q[:, :1], "chunkwise") == "chunkwise"
    assert choose_mlstm_backend(q, "reference") == "reference"
    assert set(BACKENDS) == {"reference", "chunkwise", "native", "triton"}
    with pytest.raises(ValueError, match=r"^the 'native' backend runs on the CPU, got meta$"):
        choose_mlstm_backend(q.to("meta"), "native")


def _inputs():
    return torch.zeros(1, 6, 2, 4), torch.zeros(1, 6, 2, 4), torch.zeros(1, 6, 2, 5), torch.zeros(1, 6, 2), torch.zeros(1, 6, 2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"chunk_size": 0}, r"chunk_size must be an integer >= 1, got 0"),
        ({"chunk_size": True}, r"chunk_size must be an integer"),
        ({"backend": "chunkwize"}, r"unknown mLSTM backend 'chunkwize'; did you mean 'chunkwise'\?"),
        ({"initial_state": torch.zeros(1, 2, 4, 5)}, r"initial_state must be an MLSTMState or a \(C, n, m\) tuple"),
    ],
)
def test_arguments_particular_to_mlstm_get_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as info:
        mlstm(*_inputs(), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("layout", ["token_major", "channel_major"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_compiled_forward_fake_agrees_with_the_op(layout, dtype):
    """torch.library.opcheck: the fake torch.compile traces with (native.py) gives the op's
    output shapes, dtypes and strides; packed sequences (an empty one too) and a partial chunk."""
    built(mlstm_native.COMPILED)
    gen = torch.Generator().manual_seed(0)
    q, k, v, i, f = (relayout(torch.randn(*shape, generator=gen, dtype=dtype), layout)
                     for shape in [(1, 7, 2, 4), (1, 7, 2, 4), (1, 7, 2, 3), (1, 7, 2), (1, 7, 2)])
    state = [torch.randn(3, 2, 4, 3, dtype=dtype), torch.randn(3, 2, 4, dtype=dtype), torch.randn(3, 2, dtype=dtype)]
    torch.library.opcheck(torch.ops.layerzoo.mlstm_forward, (q, k, v, i, f, *state, [0, 5, 5, 7], 2, 1e-6))


@pytest.mark.parametrize("change,match", [
    ({"offsets": [0, 6]}, r"offsets must rise from 0 to T = 7"),
    ({"chunk": 0}, r"chunk must be in \[1, \d+\], got 0"),
    ({"C": torch.zeros(1, 2, 4, 4)}, r"C must have shape \[1, 2, 4, 3\], got \[1, 2, 4, 4\]"),
    ({"f": torch.zeros(1, 7, 2, dtype=torch.float64)}, r"f must be Float like q, got Double"),
])
def test_the_raw_compiled_op_checks_its_arguments(change, match):
    built(mlstm_native.COMPILED)
    args = {"q": torch.zeros(1, 7, 2, 4), "k": torch.zeros(1, 7, 2, 4), "v": torch.zeros(1, 7, 2, 3),
            "i": torch.zeros(1, 7, 2), "f": torch.zeros(1, 7, 2), "C": torch.zeros(1, 2, 4, 3), "n": torch.zeros(1, 2, 4),
            "m": torch.zeros(1, 2), "offsets": [0, 7], "chunk": 2, "eps": 1e-6} | change
    with pytest.raises(ValueError, match=match) as info:
        torch.ops.layerzoo.mlstm_forward(*args.values())
    assert "\n" not in str(info.value)


def test_without_the_compiled_forward_pytorch_runs(monkeypatch, caplog):
    """LAYERZOO_NATIVE=0 or a failed build (one warning): "auto" chooses chunkwise, and "native"
    asked for by name runs the PyTorch forward."""
    q, k, v, i, f = _inputs()
    monkeypatch.setenv("LAYERZOO_NATIVE", "0")
    assert mlstm_native.native_forward(q, k, v, i, f, None, 2, None) is None
    monkeypatch.delenv("LAYERZOO_NATIVE")

    def failed_build(**_):
        raise RuntimeError("Ninja is required to load C++ extensions")

    monkeypatch.setattr(cpp_extension, "load", failed_build)

    monkeypatch.setattr(native_build, "load_built", lambda name: False)  # no finished build to load
    mlstm_native.COMPILED.load.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=native_build.__name__):
            assert mlstm_native.native_forward(q, k, v, i, f, None, 2, None) is None
        assert "compiled CPU mLSTM unavailable (Ninja is required" in caplog.text
        assert choose_mlstm_backend(q) == "chunkwise"
        assert torch.equal(mlstm(q, k, v, i, f, backend="native"), torch.zeros(1, 6, 2, 5))
    finally:
        mlstm_native.COMPILED.load.cache_clear()
