"""The kernel conformance suite over every built-in family and every backend that runs here.

The families are described in layerzoo.testing.families and the backends that run here listed in
tests/helpers/kernel_backends.py; a kernel of a later issue is checked by adding its family there
and its backends here. Comparisons of fast kernels with the truth stay in each kernel's tests.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.testing import (
    check_kernel_bad_inputs, check_kernel_bad_offsets, check_kernel_empty_inputs, check_kernel_family,
    check_kernel_gradients, check_kernel_layouts, check_kernel_packed, check_kernel_reference, check_kernel_streaming,
    kernel_cases, packed_cases,
)
from layerzoo.testing.tolerances import assert_close
from layerzoo.testing.trees import tensors_in

from tests.helpers.kernel_backends import AUTO, BACKENDS, TRITON_BACKENDS


@pytest.mark.parametrize("backend", BACKENDS + AUTO, ids=str)
@given(data=st.data())
def test_two_calls_with_the_state_carried_equal_one_call(backend, data):
    case = data.draw(kernel_cases(backend.family))
    split = data.draw(st.integers(0, next(iter(case.inputs.values())).shape[1]))
    with backend.context():
        check_kernel_streaming(backend.family, case, backend.name, split)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@given(data=st.data())
def test_calls_without_tokens_give_empty_outputs(backend, data):
    with backend.context():
        check_kernel_empty_inputs(backend.family, data.draw(kernel_cases(backend.family)), backend.name)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@given(data=st.data())
def test_non_contiguous_inputs_give_the_same_result(backend, data):
    with backend.context():
        check_kernel_layouts(backend.family, data.draw(kernel_cases(backend.family)), backend.name)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@given(data=st.data())
def test_gradients_reach_every_input_and_the_initial_state(backend, data):
    case = data.draw(kernel_cases(backend.family, min_length=2, initial_state=True))
    with backend.context():
        check_kernel_gradients(backend.family, case, backend.name)


@pytest.mark.parametrize("backend", BACKENDS, ids=str)
@given(data=st.data())
def test_bad_shapes_and_dtypes_get_one_line_errors(backend, data):
    case = data.draw(kernel_cases(backend.family, max_length=2))  # checked before any backend runs
    with backend.context():
        check_kernel_bad_inputs(backend.family, case, backend.name)


@pytest.mark.parametrize("backend", BACKENDS + AUTO, ids=str)
@given(data=st.data())
def test_every_backend_agrees_with_the_reference_in_fp64(backend, data):
    case = data.draw(kernel_cases(backend.family, min_length=2))
    with backend.context():
        check_kernel_reference(backend.family, case, backend.name)


@pytest.mark.parametrize("backend", BACKENDS + AUTO, ids=str)
@given(data=st.data())
def test_autocast_does_not_reach_inside_a_kernel(backend, data):
    """A model under bf16 autocast hands its kernels fp32 (or bf16) tensors; the kernel computes
    as it would without autocast: fp32 inputs give the fp32 results, states included."""
    case = data.draw(kernel_cases(backend.family, dtypes=[torch.float32], min_length=2))
    family = backend.family
    with backend.context():
        expected, expected_state = family.run(case.inputs, case.state, backend.name, case.options)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out, state = family.run(case.inputs, case.state, backend.name, case.options)
    assert out.dtype == expected.dtype
    assert_close(out, expected, torch.float32, what=f"{family.name} {backend.name} under autocast: output")
    for index, (got, want) in enumerate(zip(tensors_in(state), tensors_in(expected_state))):
        assert got.dtype == want.dtype, f"{family.name} {backend.name} under autocast: state [{index}] is {got.dtype}"
        assert_close(got, want, torch.float32, what=f"{family.name} {backend.name} under autocast: state [{index}]")


PACKING = [backend for backend in BACKENDS + AUTO if backend.family.packs]


@pytest.mark.parametrize("backend", PACKING, ids=str)
@given(data=st.data())
def test_a_packed_call_equals_one_call_per_sequence(backend, data):
    case, lengths = data.draw(packed_cases(backend.family))
    offsets_dtype = data.draw(st.sampled_from([torch.int32, torch.int64]))
    with backend.context():
        check_kernel_packed(backend.family, case, backend.name, lengths, offsets_dtype)


@pytest.mark.parametrize("backend", [backend for backend in BACKENDS if backend.family.packs], ids=str)
@given(data=st.data())
def test_malformed_cu_seqlens_get_one_line_errors(backend, data):
    case, lengths = data.draw(packed_cases(backend.family, max_length=3))  # checked before any backend runs
    with backend.context():
        check_kernel_bad_offsets(backend.family, case, backend.name, lengths)


@pytest.mark.parametrize("backend", TRITON_BACKENDS, ids=str)
def test_triton_backends_pass_every_check_on_a_few_tokens(backend):
    check_kernel_family(backend.family, backend.name, backend.dtypes, max_batch=1, max_length=4, max_examples=3,
                        max_sequences=2)


def test_importing_layerzoo_imports_no_triton():
    """Triton reads TRITON_INTERPRET when a kernel is decorated: every family's Triton kernels load
    on first use, never with the package (its lazy triton/ folders included)."""
    code = (
        "import sys, layerzoo, layerzoo.kernels.sliding_window.triton, layerzoo.kernels.mlstm\n"
        "assert 'triton' not in sys.modules, sorted(m for m in sys.modules if 'triton' in m)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "TRITON_INTERPRET": "1"}, timeout=120)
