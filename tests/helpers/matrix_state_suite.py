"""The tests SSD and KDA share (tests/kernels/test_ssd.py, test_kda.py run them, one family each):
chunkwise, native (and fla on CUDA) against the step loop, and the step loop and chunkwise against
flash-linear-attention's naive references. Each family comes as an Op that says how to draw and
call it; matrix_state_tests(op) makes the tests of one.
"""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Callable

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.kernels.common.native_build import CompiledOps
from layerzoo.testing import assert_close

from .kernel_backends import compiled_present
from .recurrence_inputs import (
    BETA_REGIMES, G_REGIMES, check_cuda_backend, fla_naive, make_beta, make_gates, run_with_grads, seeded_like,
)


@dataclass(frozen=True)
class Op:
    """One kernel as these tests drive it: its public function, step loop and backend choice,
    whether it has a write strength beta and a decay per key channel, fla's names for it and the
    adapter to fla, and its compiled CPU forward."""

    name: str
    kernel: Callable
    reference: Callable
    choose: Callable
    delta_rule: bool  # takes beta, normalised keys
    channel_decay: bool  # g (B, T, H, K) rather than (B, T, H)
    fla_op: str  # fla.ops.<fla_op> and its naive.py
    fla_chunk: str  # the Triton chunk function fla.ops.<fla_op> exports
    fla: Callable  # the "fla" backend's adapter to it
    compiled: CompiledOps  # the native backend's kernel, a forward

    def __str__(self) -> str:
        return self.name


def make_inputs(op: Op, shape, key_dim: int, value_dim: int, gen, g_regime="typical", beta_regime="uniform",
                dtype=torch.float32, initial_state: bool = True) -> dict:
    """The kernel's inputs: q, k, v in `dtype` (keys normalised for the delta rule, as its mixers
    feed it), gates drawn from their regimes and an initial state, both in the kernel's compute
    dtype (fp32, or fp64 for fp64 inputs)."""
    batch, _, heads = shape
    k = torch.randn(*shape, key_dim, generator=gen)
    inputs = {
        "q": torch.randn(*shape, key_dim, generator=gen).to(dtype),
        "k": (F.normalize(k, dim=-1) if op.delta_rule else k).to(dtype),
        "v": torch.randn(*shape, value_dim, generator=gen).to(dtype),
        "g": make_gates(g_regime, (*shape, key_dim) if op.channel_decay else shape, gen),
    }
    if op.delta_rule:
        inputs["beta"] = make_beta(beta_regime, shape, gen)
    if initial_state:
        inputs["initial_state"] = torch.randn(batch, heads, key_dim, value_dim, generator=gen)
    exact = torch.promote_types(dtype, torch.float32)
    return {name: t if name in ("q", "k", "v") else t.to(exact) for name, t in inputs.items()}


@st.composite
def cases(draw, op: Op, dtypes=(torch.float64, torch.float32, torch.bfloat16), max_length=150):
    """(inputs, kwargs): odd and chunk-crossing lengths, gates at every regime, with or without a
    state, chunk sizes and scales."""
    length = draw(st.one_of(st.integers(1, 40), st.integers(41, max_length)))
    shape = (draw(st.integers(1, 2)), length, draw(st.integers(1, 3)))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    inputs = make_inputs(op, shape, draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([4, 12])), gen,
                         draw(st.sampled_from(G_REGIMES)), draw(st.sampled_from(BETA_REGIMES)),
                         draw(st.sampled_from(dtypes)), draw(st.booleans()))
    kwargs = {"chunk_size": draw(st.sampled_from([3, 16, 32, 64])), "scale": draw(st.one_of(st.none(), st.floats(0.1, 2.0)))}
    return inputs, kwargs


def truth(op: Op, scale=None, **inputs):
    """The step loop in fp64 on the very same (possibly bf16-rounded) inputs."""
    return op.reference(**{name: t.double() for name, t in inputs.items()}, scale=scale)


def compiled_forward(op: Op, inputs: dict, **kwargs):
    """(out, final state) of the native backend without autograd: its compiled CPU forward, which
    the test requires to be built."""
    with torch.no_grad(), compiled_present(op.compiled):
        return op.kernel(**inputs, **kwargs, output_final_state=True, backend="native")


def state_shape(inputs: dict) -> tuple[int, ...]:
    batch, _, heads, key_dim = inputs["k"].shape
    return (batch, heads, key_dim, inputs["v"].shape[-1])


def matrix_state_tests(op: Op) -> type:
    """The shared tests as a class for pytest to collect (name it Test...), run on `op`: built
    afresh per family, so that hypothesis sees each family's tests as tests of their own."""

    class MatrixStateKernelTests:
        @given(data=st.data())
        def test_chunked_backends_match_the_step_loop_outputs_states_and_gradients(self, data):
            """Both chunked forwards, chunkwise's under autograd (with its gradients) and the native one,
            compiled, without autograd."""
            inputs, kwargs = data.draw(cases(op))
            dtype = inputs["q"].dtype
            grad_out = seeded_like(inputs["v"], 1)
            grad_state = torch.randn(state_shape(inputs), generator=torch.Generator().manual_seed(2))

            def chunkwise(**leaves):
                return op.kernel(**leaves, **kwargs, output_final_state=True, backend="chunkwise")

            out, state, grads = run_with_grads(chunkwise, inputs, grad_out, grad_state)
            # the truth sees the output's gradient as the kernel does: rounded to the output's dtype
            expected_out, expected_state, expected_grads = run_with_grads(
                lambda **leaves: truth(op, kwargs["scale"], **leaves), inputs, grad_out.to(dtype).double(),
                grad_state.double())
            # bf16 inputs are exact in fp32 and all arithmetic is fp32: the state is held to fp32 tolerance
            state_dtype = torch.float64 if dtype == torch.float64 else torch.float32
            for what, (out, state) in {"": (out, state), "native ": compiled_forward(op, inputs, **kwargs)}.items():
                assert out.dtype == dtype and state.dtype == torch.promote_types(dtype, torch.float32)
                assert_close(out.double(), expected_out, dtype, what=f"{what}output")
                assert_close(state.double(), expected_state, state_dtype, what=f"{what}final state", scale=10)
            for name, grad in grads.items():
                assert_close(grad.double(), expected_grads[name], dtype, what=f"d{name}",
                             scale=1 if dtype == torch.bfloat16 else 10)

        @pytest.mark.parametrize("g_regime", G_REGIMES)
        def test_extreme_gates_stay_finite_and_agree(self, g_regime):
            """Every decay regime (exp underflowing, no decay at all, resets among keeps) over three chunks,
            with the write strength at its extremes for KDA: outputs, states and gradients agree with
            the fp64 step loop and are finite."""
            for beta_regime in BETA_REGIMES if op.delta_rule else ["uniform"]:
                inputs = make_inputs(op, (1, 40, 2), 8, 8, torch.Generator().manual_seed(0), g_regime, beta_regime)
                grad_out, grad_state = seeded_like(inputs["v"], 1), seeded_like(inputs["initial_state"], 2)
                expected_out, expected_state, expected_grads = run_with_grads(
                    lambda **leaves: truth(op, **leaves), inputs, grad_out.double(), grad_state.double())
                for backend in ("reference", "chunkwise"):
                    out, state, grads = run_with_grads(
                        lambda **leaves: op.kernel(**leaves, output_final_state=True, chunk_size=16, backend=backend),
                        inputs, grad_out, grad_state)
                    what = f"{backend}, g {g_regime}, beta {beta_regime}"
                    assert_close(out, expected_out, torch.float32, what=f"{what}: output")
                    assert_close(state, expected_state, torch.float32, what=f"{what}: final state")
                    for name, grad in grads.items():  # assert_close also fails on NaN or Inf
                        assert_close(grad, expected_grads[name], torch.float32, what=f"{what}: d{name}", scale=10)
                out, state = compiled_forward(op, inputs, chunk_size=16)
                assert_close(out, expected_out, torch.float32, what=f"native, g {g_regime}, beta {beta_regime}: output")
                assert_close(state, expected_state, torch.float32,
                             what=f"native, g {g_regime}, beta {beta_regime}: final state")

        @pytest.mark.parametrize("g_regime", ["typical", "mixed"])
        def test_gradcheck_chunkwise_in_fp64(self, g_regime):
            """Autograd through the chunkwise kernel against finite differences: every input and the
            initial state, through the output and the final state, over three chunks of 4 (the last one
            padded; KDA's decayed scores halve each chunk twice)."""
            inputs = make_inputs(op, (1, 10, 1), 3, 2, torch.Generator().manual_seed(0), g_regime)
            inputs["g"] = inputs["g"].clamp(min=-20)
            names = list(inputs)
            leaves = [inputs[name].double().requires_grad_() for name in names]

            def fn(*tensors):
                return op.kernel(**dict(zip(names, tensors)), output_final_state=True, chunk_size=4,
                                      backend="chunkwise")

            assert torch.autograd.gradcheck(fn, leaves)

        @given(data=st.data())
        def test_the_step_loop_matches_flash_linear_attention_naive_recurrence(self, data):
            naive = fla_naive(op.fla_op)
            inputs, kwargs = data.draw(cases(op, dtypes=(torch.float32,), max_length=60))
            out, state = op.reference(**inputs, scale=kwargs["scale"])
            tensors = [inputs[name] for name in ("q", "k", "v", "g", "beta") if name in inputs]
            fla_out, fla_state = getattr(naive, f"naive_recurrent_{op.fla_op}")(
                *tensors, scale=kwargs["scale"], initial_state=inputs.get("initial_state"), output_final_state=True)
            assert_close(out, fla_out, what="output vs fla naive")
            assert_close(state, fla_state, what="final state vs fla naive")

        @given(data=st.data())
        def test_chunkwise_matches_flash_linear_attention_naive_chunk(self, data):
            """Ours against the maintained library's own PyTorch version of the chunk algorithm, at typical
            gates (fla's naive KDA chunk takes whole chunks only: there T is a multiple of the chunk)."""
            naive = fla_naive(op.fla_op)
            chunk = data.draw(st.sampled_from([16, 32, 64]))
            length = chunk * data.draw(st.integers(1, 2)) if op.channel_decay else data.draw(st.integers(1, 130))
            shape = (data.draw(st.integers(1, 2)), length, data.draw(st.integers(1, 3)))
            gen = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1)))
            inputs = make_inputs(op, shape, data.draw(st.sampled_from([4, 8, 16])), 8, gen,
                                 initial_state=data.draw(st.booleans()))
            scale = data.draw(st.one_of(st.none(), st.floats(0.1, 2.0)))
            out, state = op.kernel(**inputs, scale=scale, chunk_size=chunk, output_final_state=True,
                                   backend="chunkwise")
            tensors = [inputs[name] for name in ("q", "k", "v", "g", "beta") if name in inputs]
            fla_out, fla_state = getattr(naive, f"naive_chunk_{op.fla_op}")(
                *tensors, scale=scale, initial_state=inputs.get("initial_state"), output_final_state=True,
                chunk_size=chunk)
            assert_close(out, fla_out, what="output vs fla naive chunk", scale=10)
            assert_close(state, fla_state, what="final state vs fla naive chunk", scale=10)

        def test_bf16_inputs_give_bf16_output_and_fp32_state(self):
            inputs = make_inputs(op, (2, 20, 2), 8, 8, torch.Generator().manual_seed(0), dtype=torch.bfloat16)
            for backend in ("reference", "chunkwise", "native"):
                out, state = op.kernel(**inputs, output_final_state=True, backend=backend)
                assert out.dtype == torch.bfloat16 and state.dtype == torch.float32
            assert not isinstance(op.kernel(**inputs), tuple)

        def test_choose_backend_on_cpu(self):
            q = torch.zeros(1, 16, 2, 8)
            with compiled_present(op.compiled):
                assert op.choose(q) == "native"
            assert op.choose(q, differentiable=True) == "chunkwise"  # the compiled kernel is a forward
            assert op.choose(q[:, :1]) == "reference"  # one step: decoding
            assert op.choose(q, "reference") == "reference"

        @pytest.mark.parametrize("kwargs,match", [
            ({"chunk_size": 0}, r"chunk_size must be an integer >= 1, got 0"),
            ({"backend": "chunkwize"}, r"unknown (SSD|KDA) backend 'chunkwize'; did you mean 'chunkwise'\?"),
            ({"backend": "fla"}, r"'fla' backend needs CUDA tensors"),
        ])
        def test_arguments_get_one_line_errors(self, kwargs, match):
            inputs = make_inputs(op, (1, 6, 2), 8, 4, torch.Generator().manual_seed(0))
            with pytest.raises(ValueError, match=match) as info:
                op.kernel(**inputs, **kwargs)
            assert "\n" not in str(info.value)

        def test_a_log_decay_of_minus_inf_is_refused_by_chunked_backends(self):
            inputs = make_inputs(op, (1, 6, 2), 8, 4, torch.Generator().manual_seed(0))
            inputs["g"][:, 3] = float("-inf")
            with pytest.raises(ValueError, match=rf"{op.name}: g holds -inf \(a full reset\)") as info:
                op.kernel(**inputs)
            assert "\n" not in str(info.value)
            assert torch.isfinite(op.kernel(**inputs, backend="reference")).all()

        @pytest.mark.parametrize("backend", ["reference", "chunkwise", "native"])
        def test_a_log_decay_of_plus_inf_is_refused_by_every_backend(self, backend):
            """exp(+inf) has no meaning as a decay; unrefused it is NaN, and not the same NaN on every backend."""
            inputs = make_inputs(op, (1, 6, 2), 8, 4, torch.Generator().manual_seed(0))
            inputs["g"][:, 3] = float("inf")
            with pytest.raises(ValueError, match=rf"^{op.name}: g holds \+inf; a log decay is <= 0") as info:
                op.kernel(**inputs, backend=backend)
            assert "\n" not in str(info.value)

        def test_the_fla_adapter_hands_fla_packed_sequences_without_empty_ones(self, monkeypatch):
            """fla gets its own cu_seqlens (and their host copy), g in fp32 and the initial states of the
            sequences it runs; an empty sequence's state passes through. fla's kernels run on CUDA only,
            so here a stand-in with fla's signature runs the step loop (the real one: the CUDA test)."""
            calls = []

            def fla_chunk(q, k, v, g, *args, scale, initial_state, output_final_state, cu_seqlens, cu_seqlens_cpu):
                calls.append(cu_seqlens_cpu.tolist())
                assert torch.equal(cu_seqlens, cu_seqlens_cpu) and output_final_state and g.dtype == torch.float32
                return op.kernel(q, k, v, g, *args, scale=scale, initial_state=initial_state, output_final_state=True,
                                      backend="reference", cu_seqlens=cu_seqlens)

            fla_module = types.SimpleNamespace(**{op.fla_chunk: fla_chunk})
            monkeypatch.setitem(sys.modules, f"fla.ops.{op.fla_op}", fla_module)
            offsets = [0, 0, 4, 4, 9]
            for state in (None, torch.randn(4, 2, 4, 3, generator=torch.Generator().manual_seed(1))):
                inputs = make_inputs(op, (1, 9, 2), 4, 3, torch.Generator().manual_seed(0), initial_state=False)
                out, final = op.fla(*inputs.values(), 0.5, state, bounds=offsets)
                expected, expected_final = op.kernel(**inputs, scale=0.5, initial_state=state, backend="reference",
                                                          output_final_state=True, cu_seqlens=torch.tensor(offsets))
                assert_close(out, expected, what="output")
                assert_close(final, expected_final, what="final states")
            assert calls == [[0, 4, 9], [0, 4, 9]]

        @pytest.mark.gpu
        @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
        @pytest.mark.parametrize("backend", ["fla", "chunkwise", "auto"])
        @pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
        def test_cuda_backends_match_the_step_loop(self, backend, dtype):
            inputs = make_inputs(op, (2, 300, 4), 64, 128, torch.Generator().manual_seed(0), dtype=dtype)
            assert op.choose(inputs["q"].cuda()) == "fla"
            check_cuda_backend(op.kernel, lambda **leaves: truth(op, **leaves), inputs, backend, dtype)

    return MatrixStateKernelTests
