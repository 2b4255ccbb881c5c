"""Associative memory kernels: the vectorised read and update against the per-vector reference,
the equations' meaning on hand-made cases, and the mixer form's segment semantics.

The kernel contract (updates against one memory add up, empty inputs, layouts, gradients, bad
inputs) is checked by test_kernel_conformance.py.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.kernels.assoc_memory import (
    Memory, associative_read, associative_read_reference, associative_update, associative_update_reference, dpfp,
    empty_memory,
)
from layerzoo.testing import assert_close, make_mixer, run_in_pieces, sequence_splits


def test_dpfp_multiplies_each_relu_part_with_its_rolled_neighbours():
    x = torch.randn(3, 5)
    r = torch.cat((x.relu(), (-x).relu()), dim=-1)  # (3, 10)
    n = r.shape[-1]
    expected = torch.stack([r[:, i] * r[:, (i - shift) % n] for shift in (1, 2, 3) for i in range(n)], dim=-1)
    torch.testing.assert_close(dpfp(x), expected)


@st.composite
def memory_case(draw):
    """Projections, write strengths and a memory (None, all zeros, or written before), fp32 or fp64."""
    batch, heads = draw(st.integers(1, 2)), draw(st.integers(1, 3))
    dim, value_dim = draw(st.integers(1, 6)), draw(st.integers(1, 5))
    length, tokens = draw(st.integers(1, 7)), draw(st.integers(1, 5))
    dtype = draw(st.sampled_from([torch.float32, torch.float64]))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))

    def randn(*shape):
        return torch.randn(*shape, generator=gen, dtype=dtype)

    kind = draw(st.sampled_from(["none", "zeros", "written"]))
    memory = None
    if kind == "zeros":
        memory = zeros(batch, heads, dim, value_dim, dtype)
    elif kind == "written":
        # A reachable memory: z is a sum of non-negative features, as the update makes it.
        memory = associative_update(randn(batch, 4, heads, dim), randn(batch, 4, heads, value_dim),
                                    torch.rand(batch, 4, heads, generator=gen, dtype=dtype))
    return {
        "q": randn(batch, length, heads, dim), "k": randn(batch, tokens, heads, dim),
        "v": randn(batch, tokens, heads, value_dim), "beta": torch.rand(batch, tokens, heads, generator=gen, dtype=dtype),
        "memory": memory, "normalize": draw(st.booleans()),
    }


def zeros(batch, heads, dim, value_dim, dtype):
    return Memory(*(t.to(dtype) for t in empty_memory(batch, heads, 6 * dim, value_dim)))


def leaves(case, names):
    """Fresh grad-requiring copies of the named inputs (memory tensors as 'matrix', 'normalizer')."""
    memory = case["memory"]
    tensors = {name: case[name] for name in names}
    if memory is not None:
        tensors.update(matrix=memory.matrix, normalizer=memory.normalizer)
    return {name: t.detach().clone().requires_grad_() for name, t in tensors.items()}


def compare_with_reference(fast, reference, case, names):
    """Outputs and gradients of every input of `fast` and `reference` agree."""
    results = []
    for op in (fast, reference):
        inputs = leaves(case, names)
        memory = Memory(inputs["matrix"], inputs["normalizer"]) if "matrix" in inputs else None
        out = op(inputs, memory)
        out = torch.cat([t.flatten() for t in out]) if isinstance(out, tuple) else out.flatten()
        grad_out = torch.randn(out.shape, generator=torch.Generator().manual_seed(0), dtype=out.dtype)
        grads = torch.autograd.grad(out, list(inputs.values()), grad_out, allow_unused=True)
        results.append((out, {name: g for name, g in zip(inputs, grads)}))
    (out, grads), (expected, expected_grads) = results
    dtype = case["q"].dtype
    assert_close(out, expected, dtype, what="output")
    for name, grad in expected_grads.items():
        if grad is None:
            assert grads[name] is None or not grads[name].any(), name
        else:
            assert_close(grads[name], grad, dtype, what=f"d{name}", scale=10)


@given(case=memory_case())
def test_read_matches_reference_with_gradients(case):
    if case["memory"] is None:
        batch, _, heads, dim = case["q"].shape
        case["memory"] = zeros(batch, heads, dim, case["v"].shape[-1], case["q"].dtype)

    def op(read):
        return lambda t, memory: read(t["q"], memory, normalize=case["normalize"])

    compare_with_reference(op(associative_read), op(associative_read_reference), case, ["q"])


@given(case=memory_case())
def test_update_matches_reference_with_gradients(case):
    def op(update):
        return lambda t, memory: tuple(update(t["k"], t["v"], t["beta"], memory, normalize=case["normalize"]))

    compare_with_reference(op(associative_update), op(associative_update_reference), case, ["k", "v", "beta"])


@given(case=memory_case())
def test_an_empty_memory_reads_zero_and_writes_as_none(case):
    batch, _, heads, dim = case["k"].shape
    empty = zeros(batch, heads, dim, case["v"].shape[-1], case["k"].dtype)
    assert not associative_read(case["q"], empty).any()
    from_none = associative_update(case["k"], case["v"], case["beta"], None)
    from_zeros = associative_update(case["k"], case["v"], case["beta"], empty)
    for a, b in zip(from_none, from_zeros):
        assert_close(a, b, case["k"].dtype, what="update of an empty memory")


def test_a_written_key_reads_back_beta_times_its_value_and_a_rewrite_replaces_it():
    key, first, second = torch.randn(1, 1, 1, 4), torch.randn(1, 1, 1, 3), torch.randn(1, 1, 1, 3)
    half = torch.full((1, 1, 1), 0.5)
    memory = associative_update(key, first, half)
    torch.testing.assert_close(associative_read(key, memory), 0.5 * first, rtol=1e-4, atol=1e-4)
    ones = torch.ones(1, 1, 1)
    memory = associative_update(key, first, ones)
    memory = memory.plus(associative_update(key, second, ones, memory))
    torch.testing.assert_close(associative_read(key, memory), second, rtol=1e-3, atol=1e-3)
    torch.testing.assert_close(memory.normalizer, associative_update(key, first, ones).normalizer)  # gamma = 0


@pytest.mark.parametrize("call, message", [
    (lambda: associative_read(torch.randn(1, 2, 1, 4), None), "memory is None"),
    (lambda: associative_read(torch.randn(1, 2, 1, 4), empty_memory(1, 1, 12, 3)), r"key width must be 2\*3\*d = 24"),
    (lambda: associative_read(torch.randn(1, 2, 1, 4), empty_memory(1, 1, 24, 3), backend="trition"), "unknown"),
])
def test_arguments_particular_to_the_memory_get_one_line_errors(call, message):
    with pytest.raises(ValueError, match=message) as error:
        call()
    assert "\n" not in str(error.value)


@given(data=st.data())
def test_mixer_form_reads_the_memory_of_its_segment_start(data):
    """Multi-head, normalisation on or off: any split equals one call, the first segment reads
    nothing, and tokens ignore the earlier tokens of their own segment (only whole segments are
    in memory)."""
    options = {"segment_size": data.draw(st.integers(1, 5)), "n_heads": data.draw(st.sampled_from([1, 2, 4])),
               "normalize": data.draw(st.booleans())}
    mixer = make_mixer("assoc_memory", 32, d_mem=16, **options)
    x = torch.randn(2, data.draw(st.integers(1, 16)), 32, generator=torch.Generator().manual_seed(data.draw(st.integers(0, 99))))
    size = options["segment_size"]
    last_start = (x.shape[1] - 1) // size * size
    changed = x.clone()
    changed[:, last_start] += 1  # the first token of the last segment
    with torch.no_grad():
        y = mixer(x)
        streamed, _ = run_in_pieces(mixer, x, data.draw(sequence_splits(x.shape[1])))
        y_changed = mixer(changed)
    assert_close(streamed, y, what="streamed", scale=10)
    assert not y[:, :size].any()
    torch.testing.assert_close(y_changed[:, last_start + 1:], y[:, last_start + 1:])
