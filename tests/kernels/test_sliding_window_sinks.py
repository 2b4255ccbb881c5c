"""Attention sinks in sliding_window_attention: a logit per head that joins every softmax denominator.

The reference adds the sink as a score column no value follows; the SDPA-based backends append a
sink key (kernels/sliding_window/sinks.py). Both are held to the closed form: a sink scales each
query's sink-free output by its share of the denominator, sigmoid(logsumexp(scores) - sink).
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from layerzoo.kernels import sliding_window_attention
from layerzoo.kernels.sliding_window.reference import sliding_window_mask
from layerzoo.testing.tolerances import assert_close
from tests.helpers.attention_cases import attention_case, packed_attention_case

BACKENDS = ["chunkwise", "sdpa", "auto"]


@st.composite
def sink_logits(draw, heads: int) -> torch.Tensor:
    """(heads,) fp32 logits, from far below any score (no effect) to far above (little attention left)."""
    scale = draw(st.sampled_from([0.5, 3.0, 30.0]))
    return torch.randn(heads, generator=torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))) * scale


def run(q, k, v, window, sinks, grad_out, **kwargs):
    """Output and the gradients of q, k, v and the sinks for one backward of grad_out."""
    inputs = [t.detach().requires_grad_() for t in (q, k, v, sinks)]
    out = sliding_window_attention(*inputs[:3], window, sinks=inputs[3], **kwargs)
    if out.numel():
        out.backward(grad_out)
    return out, [t.grad for t in inputs]


@settings(deadline=None)
@given(data=st.data(), case=attention_case(), backend=st.sampled_from(BACKENDS))
def test_backends_with_sinks_match_the_reference(data, case, backend):
    q, k, v, window = case
    sinks = data.draw(sink_logits(q.shape[2]))
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(q.dtype)
    out, grads = run(q, k, v, window, sinks, grad_out, backend=backend)
    expected, expected_grads = run(q, k, v, window, sinks, grad_out, backend="reference")
    assert out.dtype == q.dtype
    assert_close(out, expected, what=f"{backend} with sinks")
    for name, got, want in zip(("q", "k", "v", "sinks"), grads, expected_grads):
        assert_close(got, want, what=f"{backend} d{name} with sinks", scale=3, dtype=q.dtype)


@settings(deadline=None)
@given(data=st.data(), case=packed_attention_case(), backend=st.sampled_from(BACKENDS))
def test_packed_backends_with_sinks_match_the_reference(data, case, backend):
    q, k, v, window, cu_q, cu_k = case
    sinks = data.draw(sink_logits(q.shape[2]))
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(q.dtype)
    packed = {"cu_seqlens": cu_q, "cu_seqlens_k": cu_k}
    out, grads = run(q, k, v, window, sinks, grad_out, backend=backend, **packed)
    expected, expected_grads = run(q, k, v, window, sinks, grad_out, backend="reference", **packed)
    assert_close(out, expected, what=f"packed {backend} with sinks")
    for name, got, want in zip(("q", "k", "v", "sinks"), grads, expected_grads):
        if want is not None:
            assert_close(got, want, what=f"packed {backend} d{name} with sinks", scale=3, dtype=q.dtype)


@pytest.mark.parametrize("backend", ["reference", *BACKENDS])
@pytest.mark.parametrize("window", [None, 1, 6])
def test_a_sink_scales_each_query_by_its_share_of_the_denominator(backend, window):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 9, 4, 8, generator=gen, dtype=torch.float64)
    k, v = (torch.randn(2, 13, 2, 8, generator=gen, dtype=torch.float64) for _ in range(2))
    sinks = torch.tensor([-2.0, 0.0, 1.5, 4.0], dtype=torch.float64)
    scores = torch.einsum("bqhd,bkhd->bhqk", q, k.repeat_interleave(2, dim=2)) * 8**-0.5
    scores = scores.masked_fill(~sliding_window_mask(9, 13, window), float("-inf"))
    share = torch.sigmoid(scores.logsumexp(-1) - sinks[:, None]).transpose(1, 2)  # (B, Tq, H)
    plain = sliding_window_attention(q, k, v, window, backend="reference")
    out = sliding_window_attention(q, k, v, window, sinks=sinks, backend=backend)
    torch.testing.assert_close(out, plain * share[..., None])


def test_a_sink_far_below_every_score_changes_nothing():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 70, 2, 8, generator=gen) for _ in range(3))
    for backend in BACKENDS:
        out = sliding_window_attention(q, k, v, 16, sinks=torch.full((2,), -80.0), backend=backend)
        torch.testing.assert_close(out, sliding_window_attention(q, k, v, 16, backend=backend))


@pytest.mark.parametrize(
    "sinks,backend,match",
    [
        (torch.zeros(3), "auto", r"sinks must be \(H\) = \(4\), got \(3,\)"),
        (torch.zeros(4, 1), "auto", r"sinks must be a 1-d tensor \(H\)"),
        (torch.zeros(4, dtype=torch.long), "auto", r"sinks must be a floating-point tensor"),
        (torch.zeros(4), "triton", r"the 'triton' backend has no attention sinks; use one of reference, chunkwise, sdpa"),
    ],
)
def test_bad_sinks_get_one_line_errors(sinks, backend, match):
    q, k = torch.zeros(1, 6, 4, 8), torch.zeros(1, 8, 2, 8)
    with pytest.raises(ValueError, match=match) as info:
        sliding_window_attention(q, k, k, 4, sinks=sinks, backend=backend)
    assert "\n" not in str(info.value)
