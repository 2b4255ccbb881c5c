"""Triton sliding-window attention (backend="triton") against an fp64 reference, plus block ranges.

Without CUDA the kernels run through the Triton interpreter (tests/conftest.py sets
TRITON_INTERPRET), which costs milliseconds per tile op, so the property tests bound
B * H * Tq; the @gpu tests run realistic shapes against the sdpa backend.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from layerzoo.kernels import choose_sliding_window_backend, sliding_window_attention
from layerzoo.kernels.sliding_window import native_enabled, sliding_window_attention_reference, sliding_window_mask
from layerzoo.kernels.common.backends import triton_can_run
from layerzoo.testing.tolerances import assert_close

from tests.helpers.swa_block_ranges import first_visited_key, key_block_range, query_block_range

pytestmark = [pytest.mark.skipif(
    not triton_can_run(torch.empty(0)) and not torch.cuda.is_available(),
    reason="needs triton with CUDA or TRITON_INTERPRET=1",
), pytest.mark.usefixtures("nan_filled_allocations")]  # outputs start as NaN: every element must be written

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Gradients sum more rounded products than the output (p and ds are rounded to the input dtype
# before the dV, dK and dQ dots, as in every flash backward): twice the output tolerance.
GRAD_SCALE = {torch.float32: 2.0, torch.bfloat16: 2.0, torch.float16: 2.0}
# (heads, kv_heads): GQA groups 1, 2 and 4.
HEAD_PAIRS = [(1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4)]
# Interpreter cost grows with B * H * Tq; this keeps one example around a second or two.
MAX_ROWS = 260
TILES = [16, 32, 64]


@st.composite
def triton_case(draw, dtypes=(torch.float32, torch.bfloat16, torch.float16)):
    """(q, k, v, window, scale, blocks): odd lengths, caches (Tk > Tq), GQA, odd head dims."""
    batch = draw(st.integers(1, 2))
    heads, kv_heads = draw(st.sampled_from(HEAD_PAIRS))
    max_q = max(8, min(130, MAX_ROWS // (batch * heads)))
    q_len = draw(st.one_of(st.integers(1, 8), st.integers(1, max_q)))
    k_len = q_len + draw(st.one_of(st.just(0), st.integers(1, 70)))
    window = draw(st.one_of(st.none(), st.just(1), st.integers(1, k_len + 5)))
    dim = draw(st.sampled_from([8, 16, 24, 32]))
    dtype = draw(st.sampled_from(dtypes))
    scale = draw(st.one_of(st.none(), st.floats(0.05, 1.0)))
    # None: the interpreter's default tiles; otherwise random tiles per kernel, GPU-sized ones too.
    tile = st.tuples(st.sampled_from(TILES), st.sampled_from(TILES))
    blocks = draw(st.one_of(st.none(), st.fixed_dictionaries({"fwd": tile, "dkdv": tile, "dq": tile})))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(batch, q_len, heads, dim, generator=gen).to(dtype)
    k = torch.randn(batch, k_len, kv_heads, dim, generator=gen).to(dtype)
    v = torch.randn(batch, k_len, kv_heads, dim, generator=gen).to(dtype)
    return q, k, v, window, scale, blocks


def run_triton(q, k, v, window, scale=None, blocks=None, grad_out=None):
    """Output and (dq, dk, dv) of the triton backend; blocks=None goes through the public API."""
    from layerzoo.kernels.sliding_window.triton import sliding_window_attention_triton

    inputs = [t.detach().to(DEVICE).requires_grad_() for t in (q, k, v)]
    if blocks is None:
        out = sliding_window_attention(*inputs, window, scale=scale, backend="triton")
    else:
        out = sliding_window_attention_triton(*inputs, window, scale, blocks=blocks)
    grad_out = torch.randn_like(out) if grad_out is None else grad_out.to(DEVICE)
    out.backward(grad_out)
    return out.detach().cpu(), [t.grad.cpu() for t in inputs], grad_out.cpu()


def masked_logsumexp(q, k, window, scale):
    """(B, Tq, H) log-sum-exp of each query's visible scaled scores (fp64 in, fp64 out)."""
    group = q.shape[2] // k.shape[2]
    scores = torch.einsum("bqhd,bkhd->bqhk", q, k.repeat_interleave(group, dim=2)) * scale
    mask = sliding_window_mask(q.shape[1], k.shape[1], window)[None, :, None, :]
    return scores.masked_fill(~mask, float("-inf")).logsumexp(-1)


def run_fp64_reference(q, k, v, window, scale, grad_out, kernel_out):
    """The truth: the dense reference in fp64 on the very same (rounded) inputs.

    Its gradients are those of the flash-attention backward, which (like flash-attn and torch's
    fused SDPA) takes delta = rowsum(dO * out) from the output it returned, rounded to the input
    dtype (and, in 16 bits, computed from rounded probabilities). Where dq or dk nearly cancel
    (few keys, one dominant) that alone can exceed a 16-bit tolerance, so the truth includes it:
    with c = rowsum(dO * (exact out - kernel_out)), the kernel's score gradient is the exact one
    plus c * softmax, the gradient of sum(c * lse). Everything else is exact.
    """
    inputs = [t.detach().double().requires_grad_() for t in (q, k, v)]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    out = sliding_window_attention_reference(*inputs, window, scale)
    grad_out = grad_out.double()
    c = (grad_out * (out - kernel_out.double())).sum(-1).detach()
    loss = (out * grad_out).sum() + (c * masked_logsumexp(*inputs[:2], window, scale)).sum()
    loss.backward()
    return out.detach(), [t.grad for t in inputs]


@settings(deadline=None)
@given(case=triton_case())
def test_outputs_and_gradients_match_fp64_reference(case):
    q, k, v, window, scale, blocks = case
    out, grads, grad_out = run_triton(q, k, v, window, scale, blocks)
    assert out.dtype == q.dtype and out.shape == q.shape
    expected, expected_grads = run_fp64_reference(q, k, v, window, scale, grad_out, out)
    assert_close(out, expected, dtype=q.dtype, what="triton out")
    for name, got, want in zip("qkv", grads, expected_grads):
        assert got.dtype == q.dtype
        assert_close(got, want, dtype=q.dtype, what=f"triton d{name}", scale=GRAD_SCALE[q.dtype])


@settings(deadline=None, max_examples=6)
@given(
    q_len=st.integers(1, 20),
    cache=st.integers(40, 120),
    window=st.integers(1, 24),
    kv_heads=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**31 - 1),
)
def test_keys_before_every_window_are_never_read(q_len, cache, window, kv_heads, seed):
    """Decode over a long cache: NaN in the keys/values no window reaches changes nothing.

    A kernel that loaded those blocks would spread the NaN through its dots (0 * NaN = NaN) even
    where the mask drops the scores, so finite, correct results show the blocks are skipped.
    """
    gen = torch.Generator().manual_seed(seed)
    k_len = q_len + cache
    q = torch.randn(1, q_len, 2, 16, generator=gen)
    k, v = (torch.randn(1, k_len, kv_heads, 16, generator=gen) for _ in range(2))
    blocks = {"fwd": (16, 16), "dkdv": (16, 32), "dq": (16, 16)}
    skipped = first_visited_key(q_len, k_len, window, 32)  # every kernel starts at or after this
    poisoned_k, poisoned_v = k.clone(), v.clone()
    poisoned_k[:, :skipped] = float("nan")
    poisoned_v[:, :skipped] = float("nan")
    grad_out = torch.randn(q.shape, generator=gen)
    out, grads, _ = run_triton(q, poisoned_k, poisoned_v, window, None, blocks, grad_out)
    expected, expected_grads = run_fp64_reference(q, k, v, window, None, grad_out, out)
    assert_close(out, expected, dtype=torch.float32, what="out")
    for name, got, want in zip("qkv", grads, expected_grads):
        assert_close(got, want, dtype=torch.float32, what=f"d{name}", scale=GRAD_SCALE[torch.float32])
    assert grads[1][:, :skipped].eq(0).all() and grads[2][:, :skipped].eq(0).all()


@settings(max_examples=200, deadline=None)
@given(
    q_len=st.integers(1, 90),
    extra=st.integers(0, 60),
    window=st.integers(1, 160),
    block_m=st.sampled_from([16, 32, 64]),
    block_n=st.sampled_from([16, 32, 64]),
)
def test_block_ranges_cover_the_mask_and_nothing_more(q_len, extra, window, block_m, block_n):
    """The ranges the kernels loop over: every visible pair inside, edge blocks not empty, the
    unmasked middle fully visible, and key blocks no query reaches left out entirely."""
    k_len = q_len + extra
    window = min(window, k_len)  # the launcher passes min(window, Tk)
    mask = sliding_window_mask(q_len, k_len, window)
    for m0 in range(0, q_len, block_m):
        start, full_lo, full_hi, end = key_block_range(m0, q_len, k_len, window, block_m, block_n)
        rows = mask[m0 : m0 + block_m]
        seen = rows.any(0).nonzero().flatten()
        assert start <= full_lo <= full_hi <= end
        assert start <= seen.min() and seen.max() < end
        assert rows[:, start : start + block_n].any() and rows[:, end - block_n : end].any()
        assert rows[:, full_lo:full_hi].all()
    for n0 in range(0, k_len, block_n):
        start, full_lo, full_hi, end = query_block_range(n0, q_len, k_len, window, block_m, block_n)
        cols = mask[:, n0 : n0 + block_n]
        seen = cols.any(1).nonzero().flatten()
        if len(seen) == 0:
            assert start == end and n0 + block_n <= first_visited_key(q_len, k_len, window, 1)
            continue
        assert start <= full_lo <= full_hi <= end and n0 >= first_visited_key(q_len, k_len, window, block_n)
        assert start <= seen.min() and seen.max() < end
        assert cols[start : start + block_m].any() and cols[end - block_m : end].any()
        assert full_lo == full_hi or (full_hi <= q_len and cols[full_lo:full_hi].all())


def test_strided_inputs_and_expanded_gradient():
    """Strides are passed, not assumed: (B, H, T, D) storage viewed as (B, T, H, D), a sliced
    head dim, and the stride-0 gradient that out.sum() hands the backward."""
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 37, 24, generator=gen).transpose(1, 2)
    k = torch.randn(2, 45, 2, 40, generator=gen)[..., 3:27]
    v = torch.randn(2, 2, 45, 24, generator=gen).transpose(1, 2)
    assert not (q.is_contiguous() or k.is_contiguous() or v.is_contiguous())
    out, grads, grad_out = run_triton(q, k, v, 9, 0.3, grad_out=torch.ones(1).expand(2, 37, 4, 24))
    expected, expected_grads = run_fp64_reference(q, k, v, 9, 0.3, grad_out, out)
    assert_close(out, expected, dtype=torch.float32, what="out")
    for name, got, want in zip("qkv", grads, expected_grads):
        assert_close(got, want, dtype=torch.float32, what=f"d{name}", scale=GRAD_SCALE[torch.float32])


def test_window_at_least_keys_is_full_causal():
    gen = torch.Generator().manual_seed(2)
    q, k, v = (torch.randn(1, 40, 2, 16, generator=gen) for _ in range(3))
    full = sliding_window_attention(q, k, v, None, backend="triton")
    for window in (40, 41, 1000):
        torch.testing.assert_close(sliding_window_attention(q, k, v, window, backend="triton"), full)
    assert_close(full, sliding_window_attention_reference(q, k, v, None), what="full causal")


def test_auto_never_picks_triton_on_cpu():
    """The interpreter is for testing; on CPU "auto" keeps the compiled kernel (or chunkwise where it
    did not build)."""
    q, k = torch.randn(1, 200, 2, 16), torch.randn(1, 300, 2, 16)
    assert choose_sliding_window_backend(q, k, 32) == ("native" if native_enabled() else "chunkwise")
    assert choose_sliding_window_backend(q, k, 32, backend="triton") == "triton"


def test_float64_is_refused_in_one_line():
    q = torch.zeros(1, 4, 2, 8, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"'triton' backend supports float32, bfloat16, float16, got torch.float64") as info:
        sliding_window_attention(q, q, q, 2, backend="triton")
    assert "\n" not in str(info.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU refusal")
def test_cpu_without_interpreter_is_refused_in_one_line(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    q = torch.zeros(1, 4, 2, 8)
    with pytest.raises(ValueError, match=r"'triton' backend needs CUDA tensors .*TRITON_INTERPRET=1") as info:
        sliding_window_attention(q, q, q, 2, backend="triton")
    assert "\n" not in str(info.value)


# Realistic shapes: two windows, the dtypes; against the sdpa backend on upcast fp32 inputs.
GPU_TOLERANCE_SCALE = {torch.float32: 10.0, torch.bfloat16: 2.0, torch.float16: 2.0}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("window", [128, 2048])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_cuda_realistic_shapes_match_sdpa(window, dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    shape_q, shape_kv = (2, 4096, 16, 128), (2, 4096, 4, 128)
    q = torch.randn(shape_q, device="cuda", generator=gen).to(dtype)
    k, v = (torch.randn(shape_kv, device="cuda", generator=gen).to(dtype) for _ in range(2))
    grad_out = torch.randn(shape_q, device="cuda", generator=gen).to(dtype)
    assert choose_sliding_window_backend(q, k, window) == "triton"

    def forward_backward(backend, tensors):
        inputs = [t.detach().requires_grad_() for t in tensors]
        out = sliding_window_attention(*inputs, window, backend=backend)
        out.backward(grad_out.to(out.dtype))
        return [out.detach(), *(t.grad for t in inputs)]

    got = forward_backward("triton", (q, k, v))
    want = forward_backward("sdpa", [t.float() for t in (q, k, v)])
    for name, g, w in zip(["out", "dq", "dk", "dv"], got, want):
        assert g.dtype == dtype
        scale = GPU_TOLERANCE_SCALE[dtype] * (1 if name == "out" else GRAD_SCALE[dtype])
        assert_close(g, w, dtype=dtype, what=f"triton {name} (window {window})", scale=scale)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("q_len", [1, 7, 300])
def test_cuda_chunked_prefill_over_cache_matches_sdpa(q_len):
    gen = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(2, q_len, 8, 64, device="cuda", generator=gen, dtype=torch.bfloat16)
    k, v = (torch.randn(2, 3000, 2, 64, device="cuda", generator=gen, dtype=torch.bfloat16) for _ in range(2))
    got = sliding_window_attention(q, k, v, 512, backend="triton")
    want = sliding_window_attention(q.float(), k.float(), v.float(), 512, backend="sdpa")
    assert_close(got, want, dtype=torch.bfloat16, what=f"Tq={q_len} over 3000 keys", scale=2.0)
