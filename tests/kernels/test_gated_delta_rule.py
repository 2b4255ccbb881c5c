"""Gated delta rule kernel: chunkwise, native (and fla on CUDA) against the step-loop reference.

The kernel contract (streaming, empty inputs, layouts, gradients, bad inputs) is checked by
test_kernel_conformance.py.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st
from torch.utils import cpp_extension

from layerzoo.kernels import choose_gated_delta_rule_backend, gated_delta_rule, gated_delta_rule_reference
from layerzoo.kernels.gated_delta_rule import chunkwise as chunkwise_module
from layerzoo.kernels.common import native_build
from layerzoo.kernels.gated_delta_rule import native
from layerzoo.kernels.gated_delta_rule.fla import gated_delta_rule_fla
from layerzoo.testing import assert_close

from tests.helpers.kernel_backends import compiled_gated_delta_rule, running
from tests.helpers.layouts import LAYOUTS, relayout
from tests.helpers.recurrence_inputs import (
    BETA_REGIMES, G_REGIMES, check_cuda_backend, fla_naive, make_beta, make_gates, run_with_grads, seeded_like,
)

@st.composite
def delta_rule_case(draw, dtypes=(torch.float32, torch.bfloat16), max_length=300):
    """Inputs (dict) with normalised keys (the kernel's use), plus kwargs for gated_delta_rule."""
    # Mostly short sequences, sometimes several chunks long: CI time goes to the long ones.
    length = draw(st.one_of(st.integers(1, 40), st.integers(1, 40), st.integers(41, max_length)))
    batch, heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    key_dim, value_dim = draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from([4, 12, 32]))
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    shape = (batch, length, heads)
    inputs = {
        "q": torch.randn(*shape, key_dim, generator=gen).to(dtype),
        "k": F.normalize(torch.randn(*shape, key_dim, generator=gen), dim=-1).to(dtype),
        "v": torch.randn(*shape, value_dim, generator=gen).to(dtype),
        "g": make_gates(draw(st.sampled_from(G_REGIMES)), shape, gen),
        "beta": make_beta(draw(st.sampled_from(BETA_REGIMES)), shape, gen),
    }
    if draw(st.booleans()):
        inputs["initial_state"] = torch.randn(batch, heads, key_dim, value_dim, generator=gen)
    kwargs = {
        "chunk_size": draw(st.sampled_from([16, 32, 64])),
        "scale": draw(st.one_of(st.none(), st.floats(0.1, 2.0))),
    }
    return inputs, kwargs


def reference_fp64(scale=None, **inputs):
    """The truth: the step loop in fp64 on the very same (possibly bf16-rounded) inputs."""
    return gated_delta_rule_reference(**{name: t.double() for name, t in inputs.items()}, scale=scale)


# The chunked CPU backends (chunkwise.py): PyTorch's, and the compiled one ("native"). Both keep
# the same workspace between forward and backward.
CHUNKED = ("chunkwise", "native")


@pytest.mark.parametrize("backend", CHUNKED)
@given(case=delta_rule_case())
def test_chunked_backends_match_reference_outputs_states_and_gradients(backend, case):
    inputs, kwargs = case
    dtype = inputs["q"].dtype
    grad_out = seeded_like(inputs["v"], 1)
    batch, _, heads, key_dim = inputs["k"].shape
    state_shape = (batch, heads, key_dim, inputs["v"].shape[-1])
    grad_state = torch.randn(state_shape, generator=torch.Generator().manual_seed(2))

    def chunked(**leaves):
        return gated_delta_rule(**leaves, **kwargs, output_final_state=True, backend=backend)

    def truth(**leaves):
        return reference_fp64(kwargs["scale"], **leaves)

    with running(backend, native.COMPILED):
        out, state, grads = run_with_grads(chunked, inputs, grad_out, grad_state)
    # The kernel sees the output's gradient rounded to the output's dtype (bf16 for bf16 inputs);
    # so does the truth: where a gradient cancels (dg of one token sums K * V terms of both signs)
    # that rounding alone can move it by 30%, an error of the test and not of the kernel.
    grad_out_seen = grad_out.to(dtype).double()
    expected_out, expected_state, expected_grads = run_with_grads(truth, inputs, grad_out_seen, grad_state.double())
    assert out.dtype == dtype and state.dtype == torch.float32
    # bf16 inputs are exact in fp32 and all arithmetic is fp32, so the fp32 state is held to fp32
    # tolerance either way; the output and the gradients of bf16 inputs carry bf16 rounding.
    # fp32 gradients sum more rounding errors than the output: 10x its tolerance.
    assert_close(out.float(), expected_out, dtype, what="output")
    assert_close(state, expected_state, torch.float32, what="final state", scale=10)
    for name, grad in grads.items():
        assert_close(grad.float(), expected_grads[name], dtype, what=f"d{name}", scale=10 if dtype == torch.float32 else 1)


@pytest.mark.parametrize("backend", CHUNKED)
@pytest.mark.parametrize("g_regime", ["typical", "mixed"])
def test_gradcheck_chunked_backends_in_fp64(g_regime, backend):
    """The hand-written backward against finite differences: every input and the initial state,
    through the output and the final state, over three chunks of 2 (the last one padded)."""
    gen = torch.Generator().manual_seed(0)
    shape = (1, 5, 2)
    inputs = [
        torch.randn(*shape, 3, generator=gen), F.normalize(torch.randn(*shape, 3, generator=gen), dim=-1),
        torch.randn(*shape, 2, generator=gen), make_gates(g_regime, shape, gen).clamp(min=-20),
        torch.rand(shape, generator=gen), torch.randn(1, 2, 3, 2, generator=gen),
    ]
    inputs = [t.double().requires_grad_() for t in inputs]

    def fn(q, k, v, g, beta, state):
        return gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True, chunk_size=2, backend=backend)

    with running(backend, native.COMPILED):
        assert torch.autograd.gradcheck(fn, inputs)


@pytest.mark.parametrize("grad", [False, True])
def test_chunkwise_over_several_groups_of_chunks(grad, monkeypatch):
    """The PyTorch forward takes a group of chunks at a time (all kept for the backward, or one
    group's worth without autograd): with room for 16 chunks, 38 chunks of 16 make three groups,
    the last one short and padded."""
    bytes_per_chunk = chunkwise_module.workspace_bytes_per_chunk(2, 16, 8, 4, 4)
    monkeypatch.setattr(chunkwise_module, "GROUP_BYTES", 16 * bytes_per_chunk)
    gen = torch.Generator().manual_seed(0)
    shape = (1, 600, 2)
    inputs = {
        "q": torch.randn(*shape, 8, generator=gen), "k": F.normalize(torch.randn(*shape, 8, generator=gen), dim=-1),
        "v": torch.randn(*shape, 4, generator=gen), "g": make_gates("typical", shape, gen),
        "beta": make_beta("uniform", shape, gen), "initial_state": torch.randn(1, 2, 8, 4, generator=gen),
    }
    expected_out, expected_state = reference_fp64(**inputs)
    with torch.set_grad_enabled(grad):
        leaves = {name: t.clone().requires_grad_(grad) for name, t in inputs.items()}
        out, state = gated_delta_rule(**leaves, output_final_state=True, chunk_size=16, backend="chunkwise")
    assert out.requires_grad == grad
    assert_close(out, expected_out, what="output")
    assert_close(state, expected_state, what="final state", scale=10)


@given(case=delta_rule_case(dtypes=(torch.float64, torch.float32, torch.bfloat16), max_length=150),
       layout=st.sampled_from(LAYOUTS))
def test_compiled_kernels_agree_with_the_pytorch_ones_step_by_step(case, layout):
    """The two forwards keep the same workspace (padding of the last chunk included) and give the
    same output and final state; the two backwards give the same gradients from one workspace;
    whatever the memory layout of the inputs and of the output's gradient (the compiled kernels
    read them with their strides)."""
    ops = compiled_gated_delta_rule()
    inputs, kwargs = case
    names = ("q", "k", "v", "g", "beta")
    q, k, v, g, beta = primals = [relayout(inputs[name], layout) for name in names]
    batch, length, heads, key_dim = k.shape
    dtype = torch.promote_types(q.dtype, torch.float32)
    initial = inputs.get("initial_state", torch.zeros(batch, heads, key_dim, v.shape[-1])).to(dtype)
    scale, chunk = kwargs["scale"] or key_dim**-0.5, min(kwargs["chunk_size"], length)
    forwards = {"compiled": functools.partial(chunkwise_module._native_forward, ops),
                "pytorch": chunkwise_module._grouped_forward}
    results = {name: run(*primals, initial.flatten(0, 1).clone(), scale, chunk, True) for name, run in forwards.items()}
    (out, state, kept), (expected_out, expected_state, expected_kept) = results["compiled"], results["pytorch"]
    assert out.dtype == expected_out.dtype == q.dtype
    assert_close(out.to(dtype), expected_out.to(dtype), q.dtype, what="output")
    assert_close(state, expected_state, dtype, what="final state", scale=10)
    for name, t, expected in zip(("states", "v_new", "w", "(I + A)^-1"), kept, expected_kept):
        assert t.shape == expected.shape and t.dtype == expected.dtype
        assert_close(t, expected, dtype, what=name, scale=10)

    d_out = relayout(seeded_like(expected_out, 1).to(q.dtype), layout)
    d_state = seeded_like(state, 2).to(dtype)
    backwards = {"compiled": functools.partial(chunkwise_module._native_backward, ops),
                 "pytorch": chunkwise_module._chunked_backward}
    grads = {name: run(primals, scale, expected_kept, d_out, d_state) for name, run in backwards.items()}
    (d_inputs, d_initial), (expected_d_inputs, expected_d_initial) = grads["compiled"], grads["pytorch"]
    for name, grad, expected, t in zip(names, d_inputs, expected_d_inputs, primals):
        assert grad.shape == t.shape and grad.dtype == expected.dtype == t.dtype
        if layout != "strided":  # laid out as its input: autograd need not copy it to match
            assert grad.stride() == t.stride(), f"d{name} strides {grad.stride()} != {t.stride()}"
        assert_close(grad.to(dtype), expected.to(dtype), t.dtype, what=f"d{name}", scale=10)
    assert_close(d_initial, expected_d_initial, dtype, what="d initial state", scale=10)


BUILD_FAILURES = [
    ("Ninja is required to load C++ extensions\n(details)", "(Ninja is required to load C++ extensions)"),
    ("Error building extension 'x': [1/2] c++ -O3 -c x.cpp\nx.cpp:3:1: error: 'y' was not declared\nmore",
     "(x.cpp:3:1: error: 'y' was not declared)"),
]


@pytest.mark.parametrize("message,reason", BUILD_FAILURES)
def test_compiled_kernels_off_or_unbuildable_fall_back_to_pytorch(monkeypatch, caplog, message, reason):
    """LAYERZOO_NATIVE=0 turns the compiled kernels off; a failed build logs one warning with the
    reason (the compiler's error, not its command line), "auto" chooses chunkwise and "native"
    asked for by name runs the PyTorch kernels."""
    q = torch.zeros(1, 4, 1, 2)
    monkeypatch.setenv("LAYERZOO_NATIVE", "0")
    assert native.native_ops_for(q) is None
    monkeypatch.delenv("LAYERZOO_NATIVE")
    assert native.native_ops_for(q.to("meta")) is None  # CPU only

    def failed_build(**_):
        raise RuntimeError(message)

    monkeypatch.setattr(cpp_extension, "load", failed_build)

    monkeypatch.setattr(native_build, "load_built", lambda name: False)  # no finished build to load
    native.load_native_ops.cache_clear()
    try:
        with caplog.at_level(logging.WARNING, logger=native_build.__name__):
            assert native.native_ops_for(q) is None
        assert f"compiled CPU gated delta rule unavailable {reason}; using the PyTorch one" in caplog.text
        assert choose_gated_delta_rule_backend(q) == "chunkwise"
        leaf = q.clone().requires_grad_()
        out = gated_delta_rule(leaf, q, q, q[..., 0], q[..., 0], backend="native")
        out.sum().backward()
        assert out.shape == q.shape and not out.any() and leaf.grad is not None
    finally:
        native.load_native_ops.cache_clear()


@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler: the PyTorch kernels run")
def test_compiled_kernels_build_where_a_compiler_is():
    assert native.load_native_ops() is not None


def test_a_build_lock_left_by_a_killed_build_is_cleared():
    """torch's `lock` file outlives a build killed mid-way, and torch then waits on it forever; a
    new process holding layerzoo's OS lock knows it is stale, removes it and loads."""
    compiled_gated_delta_rule()
    stale = native.build_directory() / "lock"
    stale.write_text("")
    # through torch's builder, as a changed build would go (a finished one loads from its file, lock unread)
    load = ("from layerzoo.kernels.common import native_build; native_build.load_built = lambda name: False\n"
            "from layerzoo.kernels.gated_delta_rule.native import load_native_ops; assert load_native_ops() is not None")
    result = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert not stale.exists() and "left by a build that did not finish" in result.stderr


@pytest.mark.slow  # two first-use builds in a fresh cache
@pytest.mark.skipif(shutil.which("c++") is None, reason="no C++ compiler: the PyTorch kernels run")
def test_a_first_use_build_killed_mid_way_leaves_the_next_call_working(tmp_path):
    """SIGKILL while the compiler runs, then a new process: it rebuilds and loads, never waits."""
    env = {**os.environ, "TORCH_EXTENSIONS_DIR": str(tmp_path)}
    load = "from layerzoo.kernels.gated_delta_rule.native import load_native_ops; assert load_native_ops() is not None"
    directory = subprocess.run([sys.executable, "-c", "from layerzoo.kernels.gated_delta_rule.native import "
                                "build_directory; print(build_directory())"], env=env, capture_output=True,
                               text=True, check=True).stdout.strip()
    build = subprocess.Popen([sys.executable, "-c", load], env=env, stderr=subprocess.DEVNULL)
    torch_lock = Path(directory) / "lock"
    try:
        for _ in range(1200):  # torch writes its lock when the compiler starts
            if torch_lock.exists() or build.poll() is not None:
                break
            time.sleep(0.1)
        assert build.poll() is None and torch_lock.exists(), "the build never started"
        time.sleep(1.0)
    finally:
        build.kill()
        build.wait()
    result = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "left by a build that did not finish" in result.stderr


def test_the_raw_compiled_ops_check_their_arguments():
    """torch.ops.layerzoo.* called directly: every misuse is a one-line ValueError, never a crash."""
    ops = compiled_gated_delta_rule()
    q, v = torch.randn(1, 5, 2, 4), torch.randn(1, 5, 2, 3)
    g, beta, state = torch.zeros(1, 5, 2), torch.ones(1, 5, 2), torch.zeros(2, 4, 3)
    good = {"q": q, "k": q, "v": v, "g": g, "beta": beta, "scale": 0.5, "state": state, "chunk": 2, "keep": True}
    forward_misuse = [
        ({"chunk": 0}, r"chunk must be in \[1, \d+\], got 0"),
        ({"state": torch.zeros(2, 4, 4)}, r"state must have shape \[2, 4, 3\], got \[2, 4, 4\]"),
        ({"state": torch.zeros(2, 3, 4).transpose(1, 2)}, r"state must be contiguous"),
        ({"v": torch.randn(1, 4, 2, 3)}, r"v must have shape \[1, 5, 2, 3\], got \[1, 4, 2, 3\]"),
        ({"g": torch.zeros(1, 5)}, r"g must have shape \[1, 5, 2\], got \[1, 5\]"),
        ({"q": q[..., 0]}, r"q and v must be 4-d"),
        ({"q": q.half(), "k": q.half()}, r"inputs must be float32 or float64, got Half"),
        ({"beta": beta.double()}, r"beta must be Float like q, got Double"),
        ({"q": q[:, :0], "k": q[:, :0], "v": v[:, :0], "g": g[:, :0], "beta": beta[:, :0]}, r"needs at least one token, got T = 0"),
    ]
    for change, match in forward_misuse:
        with pytest.raises(ValueError, match="^gated_delta_rule_forward: " + match) as error:
            ops.gated_delta_rule_forward(*{**good, **change}.values())
        assert "\n" not in str(error.value)
    out, *space = ops.gated_delta_rule_forward(*good.values())
    for index, name in enumerate(["states", "v_new", "w"]):
        wrong = list(space)
        wrong[index] = space[index][:, :1]
        with pytest.raises(ValueError, match=rf"^gated_delta_rule_backward: {name} must have shape"):
            ops.gated_delta_rule_backward(q, q, v, g, beta, 0.5, *wrong, out, state)
    with pytest.raises(ValueError, match=r"^gated_delta_rule_backward: d_out must have shape \[1, 5, 2, 3\]"):
        ops.gated_delta_rule_backward(q, q, v, g, beta, 0.5, *space, q, state)


def test_chunkwise_gradients_of_some_inputs_only():
    """Inputs without requires_grad, and a loss on the final state alone (no output gradient)."""
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 9, 2, 4, generator=gen) for _ in range(3))
    g, beta = -torch.rand(1, 9, 2, generator=gen), torch.rand(1, 9, 2, generator=gen)
    v_leaf = v.clone().requires_grad_()
    _, state = gated_delta_rule(q, k, v_leaf, g, beta, output_final_state=True, chunk_size=4, backend="chunkwise")
    state.sum().backward()
    expected = v.clone().requires_grad_()
    gated_delta_rule_reference(q, k, expected, g, beta)[1].sum().backward()
    assert_close(v_leaf.grad, expected.grad, what="dv from the final state alone")


@pytest.mark.parametrize("chunked", CHUNKED)
@pytest.mark.parametrize("g_regime", G_REGIMES)
@pytest.mark.parametrize("beta_regime", BETA_REGIMES)
def test_extreme_gates_stay_finite_and_agree(g_regime, beta_regime, chunked):
    gen = torch.Generator().manual_seed(0)
    shape = (1, 40, 2)
    inputs = {
        "q": torch.randn(*shape, 8, generator=gen),
        "k": F.normalize(torch.randn(*shape, 8, generator=gen), dim=-1),
        "v": torch.randn(*shape, 8, generator=gen),
        "g": make_gates(g_regime, shape, gen),
        "beta": make_beta(beta_regime, shape, gen),
        "initial_state": torch.randn(1, 2, 8, 8, generator=gen),
    }
    grad_out, grad_state = seeded_like(inputs["v"], 1), seeded_like(inputs["initial_state"], 2)
    expected_out, expected_state, expected_grads = run_with_grads(reference_fp64, inputs, grad_out.double(), grad_state.double())
    for backend in ("reference", chunked):

        def kernel(**leaves):
            return gated_delta_rule(**leaves, output_final_state=True, chunk_size=16, backend=backend)

        with running(backend, native.COMPILED):
            out, state, grads = run_with_grads(kernel, inputs, grad_out, grad_state)
        assert_close(out, expected_out, torch.float32, what=f"{backend} output")
        assert_close(state, expected_state, torch.float32, what=f"{backend} final state")
        for name, grad in grads.items():  # assert_close also fails on NaN or Inf
            assert_close(grad, expected_grads[name], torch.float32, what=f"{backend} d{name}", scale=10)


@given(case=delta_rule_case(dtypes=(torch.float32,), max_length=80))
def test_reference_matches_flash_linear_attention_naive_recurrence(case):
    naive = fla_naive()
    inputs, kwargs = case
    out, state = gated_delta_rule_reference(**inputs, scale=kwargs["scale"])
    # fla's naive reference takes beta before g
    fla_out, fla_state = naive.naive_recurrent_gated_delta_rule(
        inputs["q"], inputs["k"], inputs["v"], inputs["beta"], inputs["g"], scale=kwargs["scale"],
        initial_state=inputs.get("initial_state"), output_final_state=True,
    )
    assert_close(out, fla_out, what="output vs fla naive")
    assert_close(state, fla_state, what="final state vs fla naive")


@given(case=delta_rule_case(dtypes=(torch.float32,), max_length=150))
def test_chunkwise_matches_flash_linear_attention_naive_chunk(case):
    """Ours against the maintained library's own PyTorch version of the same chunk algorithm."""
    naive = fla_naive()
    inputs, kwargs = case
    out, state = gated_delta_rule(**inputs, **kwargs, output_final_state=True, backend="chunkwise")
    fla_out, fla_state = naive.naive_chunk_gated_delta_rule(
        inputs["q"], inputs["k"], inputs["v"], inputs["g"], inputs["beta"], chunk_size=kwargs["chunk_size"],
        scale=kwargs["scale"], initial_state=inputs.get("initial_state"), output_final_state=True,
    )
    assert_close(out, fla_out, what="output vs fla naive chunk", scale=10)
    assert_close(state, fla_state, what="final state vs fla naive chunk", scale=10)


def test_bf16_inputs_give_bf16_output_and_fp32_state():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 20, 2, 8, generator=gen).bfloat16() for _ in range(3))
    g, beta = -torch.rand(2, 20, 2, generator=gen), torch.rand(2, 20, 2, generator=gen)
    for backend in ("reference", *CHUNKED):
        out, state = gated_delta_rule(q, k, v, g, beta, output_final_state=True, backend=backend)
        assert out.dtype == torch.bfloat16 and state.dtype == torch.float32
    assert not isinstance(gated_delta_rule(q, k, v, g, beta), tuple)


def test_choose_backend_on_cpu():
    q = torch.zeros(1, 16, 2, 8)
    compiled_gated_delta_rule()
    assert choose_gated_delta_rule_backend(q) == "native"
    assert choose_gated_delta_rule_backend(q, "chunkwise") == "chunkwise"
    assert choose_gated_delta_rule_backend(q[:, :1]) == "reference"  # one step: decoding
    assert choose_gated_delta_rule_backend(q, "reference") == "reference"


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"chunk_size": 0}, r"chunk_size must be an integer >= 1, got 0"),
        ({"backend": "chunkwize"}, r"unknown gated delta rule backend 'chunkwize'; did you mean 'chunkwise'\?"),
        ({"backend": "fla"}, r"'fla' backend needs CUDA tensors"),
    ],
)
def test_arguments_particular_to_the_gated_delta_rule_get_one_line_errors(kwargs, match):
    q, v, gate = torch.zeros(1, 6, 2, 8), torch.zeros(1, 6, 2, 4), torch.zeros(1, 6, 2)
    with pytest.raises(ValueError, match=match) as info:
        gated_delta_rule(q, q, v, gate, gate, **kwargs)
    assert "\n" not in str(info.value)


def test_a_log_decay_of_minus_inf_is_refused_by_chunked_backends():
    q, v, g = torch.randn(1, 6, 2, 8), torch.randn(1, 6, 2, 4), torch.zeros(1, 6, 2)
    g[:, 3] = float("-inf")
    with pytest.raises(ValueError, match=r"gated_delta_rule: g holds -inf \(a full reset\)") as info:
        gated_delta_rule(q, q, v, g, g.exp() / 2)
    assert "\n" not in str(info.value)
    assert torch.isfinite(gated_delta_rule(q, q, v, g, g.exp() / 2, backend="reference")).all()


@pytest.mark.parametrize("backend", ["reference", *CHUNKED])
def test_a_log_decay_of_plus_inf_is_refused_by_every_backend(backend):
    """exp(+inf) has no meaning as a decay; unrefused it is NaN, and not the same NaN on every backend."""
    q, v, g = torch.randn(1, 6, 2, 8), torch.randn(1, 6, 2, 4), -torch.rand(1, 6, 2)
    g[:, 3, 1] = float("inf")
    with pytest.raises(ValueError, match=r"^gated_delta_rule: g holds \+inf; a log decay is <= 0") as info:
        gated_delta_rule(q, q, v, g, torch.full_like(g, 0.5), backend=backend)
    assert "\n" not in str(info.value)


def test_the_fla_adapter_hands_fla_packed_sequences_without_empty_ones(monkeypatch):
    """fla gets its own cu_seqlens (and their host copy) and the initial states of the sequences
    it runs; an empty sequence's state passes through. fla's kernels run on CUDA only, so here a
    stand-in with fla's signature runs the step loop (the real one: test_packed_cuda.py)."""
    calls = []

    def chunk_gated_delta_rule(q, k, v, g, beta, *, scale, initial_state, output_final_state, chunk_size, cu_seqlens,
                               cu_seqlens_cpu):
        calls.append(cu_seqlens_cpu.tolist())
        assert torch.equal(cu_seqlens, cu_seqlens_cpu) and output_final_state
        return gated_delta_rule(q, k, v, g, beta, scale=scale, initial_state=initial_state, output_final_state=True,
                                backend="reference", cu_seqlens=cu_seqlens)

    monkeypatch.setitem(sys.modules, "fla.ops.gated_delta_rule", types.SimpleNamespace(
        chunk_gated_delta_rule=chunk_gated_delta_rule))
    gen = torch.Generator().manual_seed(0)
    shape, lengths = (1, 9, 2), [0, 4, 0, 5]
    q, k = torch.randn(*shape, 4, generator=gen), F.normalize(torch.randn(*shape, 4, generator=gen), dim=-1)
    v, g, beta = torch.randn(*shape, 3, generator=gen), make_gates("typical", shape, gen), torch.rand(shape, generator=gen)
    offsets = [0, 0, 4, 4, 9]
    for state in (None, torch.randn(4, 2, 4, 3, generator=gen)):
        out, final = gated_delta_rule_fla(q, k, v, g, beta, 0.5, state, 64, bounds=offsets)
        expected, expected_final = gated_delta_rule(q, k, v, g, beta, scale=0.5, initial_state=state, backend="reference",
                                                    output_final_state=True, cu_seqlens=torch.tensor(offsets))
        assert_close(out, expected, what="output")
        assert_close(final, expected_final, what="final states")
    assert calls == [[0, 4, 9], [0, 4, 9]]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["fla", "chunkwise", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_backends_match_reference(backend, dtype):
    gen = torch.Generator().manual_seed(0)
    shape = (2, 300, 4)
    inputs = {
        "q": torch.randn(*shape, 64, generator=gen).to(dtype),
        "k": F.normalize(torch.randn(*shape, 64, generator=gen), dim=-1).to(dtype),
        "v": torch.randn(*shape, 128, generator=gen).to(dtype),
        "g": make_gates("typical", shape, gen),
        "beta": make_beta("uniform", shape, gen),
        "initial_state": torch.randn(2, 4, 64, 128, generator=gen),
    }
    assert choose_gated_delta_rule_backend(inputs["q"].cuda()) == "fla"
    check_cuda_backend(gated_delta_rule, reference_fp64, inputs, backend, dtype)
