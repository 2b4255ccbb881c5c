"""Sliding-window attention kernel: every backend against the dense reference, and what is particular to it.

The kernel contract (streaming over a key cache, empty inputs, layouts, gradients, bad inputs) is
checked by test_kernel_conformance.py.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

from layerzoo.kernels import (
    choose_sliding_window_backend,
    sliding_window_attention,
    sliding_window_attention_reference,
)
from layerzoo.errors import OptionError
from layerzoo.kernels.sliding_window import BACKENDS, native_enabled
from layerzoo.kernels.sliding_window.native import load_native_ops
from layerzoo.testing.tolerances import assert_close

from tests.helpers.attention_cases import attention_case, packed_attention_case

CPU_BACKENDS = ["reference", "chunkwise", "sdpa", "native", "auto"]
# GPU kernels reorder fp32 sums more, and bf16 gradients round every partial product.
CUDA_TOLERANCE_SCALE = {torch.float32: 10.0, torch.bfloat16: 2.0}


def dense_sdpa(q, k, v, window):
    """What most model code does: SDPA with a dense boolean mask, k/v heads repeated for GQA."""
    q_len, k_len = q.shape[1], k.shape[1]
    pos_q = torch.arange(k_len - q_len, k_len)[:, None]
    pos_k = torch.arange(k_len)[None, :]
    mask = (pos_k <= pos_q) & (pos_k > pos_q - (window or k_len))
    group = q.shape[2] // k.shape[2]
    k, v = (t.repeat_interleave(group, dim=2).transpose(1, 2) for t in (k, v))
    return F.scaled_dot_product_attention(q.transpose(1, 2), k, v, attn_mask=mask).transpose(1, 2)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
@pytest.mark.parametrize("q_len,k_len,window", [(5, 5, 2), (3, 7, 3), (6, 6, None), (4, 9, 1), (2, 5, 50)])
def test_window_semantics(backend, q_len, k_len, window):
    """Zero queries attend uniformly, and one-hot values expose exactly which keys each query sees."""
    q = torch.zeros(1, q_len, 1, k_len)
    v = torch.eye(k_len)[None, :, None, :]
    out = sliding_window_attention(q, torch.randn(1, k_len, 1, k_len), v, window, backend=backend)
    for i in range(q_len):
        p = k_len - q_len + i
        seen = [s for s in range(k_len) if s <= p and (window is None or s > p - window)]
        expected = torch.zeros(k_len)
        expected[seen] = 1 / len(seen)
        torch.testing.assert_close(out[0, i, 0], expected, msg=f"query {i} (position {p})")


@settings(deadline=None)
@given(case=attention_case(), backend=st.sampled_from(["chunkwise", "sdpa", "native", "auto"]))
def test_backends_match_reference(case, backend):
    q, k, v, window = case
    out = sliding_window_attention(q, k, v, window, backend=backend)
    assert out.dtype == q.dtype
    expected = sliding_window_attention_reference(q, k, v, window)
    assert_close(out, expected, what=f"{backend} vs reference")


@settings(deadline=None)
@given(case=attention_case(dtypes=(torch.float32, torch.bfloat16, torch.float64)),
       backend=st.sampled_from(["sdpa", "auto"]))
def test_a_decoding_step_matches_reference(case, backend):
    """One query after its cache (sdpa takes each key/value head's query heads as rows of one call)."""
    q, k, v, window = case
    q = q[:, -1:]
    expected = sliding_window_attention_reference(q, k, v, window, scale=0.3)
    assert_close(sliding_window_attention(q, k, v, window, scale=0.3, backend=backend), expected,
                 what=f"{backend}, one query")


@settings(deadline=None)
@given(case=attention_case(dtypes=(torch.float32,)))
def test_chunkwise_matches_dense_masked_sdpa(case):
    q, k, v, window = case
    out = sliding_window_attention(q, k, v, window, backend="chunkwise")
    assert_close(out, dense_sdpa(q, k, v, window), what="chunkwise vs dense SDPA")


@settings(deadline=None)
@given(case=attention_case(dtypes=(torch.float32, torch.float64)),
       backend=st.sampled_from(["chunkwise", "sdpa", "native"]))
def test_gradients_match_reference(case, backend):
    q, k, v, window = case
    grad_out = torch.randn_like(q)

    def grads(fn):
        inputs = [t.detach().requires_grad_() for t in (q, k, v)]
        fn(*inputs, window).backward(grad_out)
        return [t.grad for t in inputs]

    expected = grads(sliding_window_attention_reference)
    actual = grads(lambda *a: sliding_window_attention(*a, backend=backend))
    for name, got, want in zip("qkv", actual, expected):
        # The absolute floor matters where the truth is zero: dq and dk when window=1.
        assert_close(got, want, what=f"{backend} d{name}")


def test_scale_and_window_at_least_keys_is_full_causal():
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 70, 2, 8, generator=gen) for _ in range(3))
    for backend in CPU_BACKENDS:
        wide = sliding_window_attention(q, k, v, 70, scale=0.3, backend=backend)
        full = sliding_window_attention(q, k, v, None, scale=0.3, backend=backend)
        torch.testing.assert_close(wide, full)
        torch.testing.assert_close(full, sliding_window_attention_reference(q, k, v, None, scale=0.3))


@pytest.mark.parametrize("window", [1, 5])
def test_every_cpu_backend_scales_the_scores_in_a_window_as_asked(window):
    """Gemma-3's score scale (query_pre_attn_scalar ** -0.5, not head_dim's) over a window and a cache."""
    gen = torch.Generator().manual_seed(1)
    q, k, v = torch.randn(2, 9, 4, 8, generator=gen), *(torch.randn(2, 13, 2, 8, generator=gen) for _ in range(2))
    expected = sliding_window_attention_reference(q, k, v, window, scale=0.3)
    if window > 1:
        assert not torch.allclose(expected, sliding_window_attention_reference(q, k, v, window), atol=1e-3)
    for backend in CPU_BACKENDS:
        assert_close(sliding_window_attention(q, k, v, window, scale=0.3, backend=backend), expected, what=backend)


def test_choose_backend_on_cpu():
    q, k = torch.randn(1, 16, 4, 8), torch.randn(1, 32, 2, 8)
    assert choose_sliding_window_backend(q, k, 8) == ("native" if native_enabled() else "chunkwise")
    assert choose_sliding_window_backend(q, k, None) == "sdpa"
    assert choose_sliding_window_backend(q, k, 32) == "sdpa"  # the window covers every key: plain causal
    assert choose_sliding_window_backend(q, k, 8, backend="reference") == "reference"
    assert set(BACKENDS) >= {"reference", "chunkwise", "sdpa", "flex", "native"}


def test_native_falls_back_to_chunkwise_when_turned_off(monkeypatch):
    """LAYERZOO_NATIVE=0 (or no compiler): "auto" runs chunkwise, and "native" asked for by name
    computes with it, gradients included."""
    monkeypatch.setenv("LAYERZOO_NATIVE", "0")
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 40, 2, 8, generator=gen, requires_grad=True) for _ in range(3))
    assert choose_sliding_window_backend(q, k, 8) == "chunkwise"
    out = sliding_window_attention(q, k, v, 8, backend="native")
    assert_close(out, sliding_window_attention_reference(q, k, v, 8), what="native turned off")
    out.sum().backward()
    assert q.grad is not None


@settings(deadline=None)
@given(case=packed_attention_case(), backend=st.sampled_from(["chunkwise", "sdpa", "native", "auto"]))
def test_packed_backends_match_the_packed_reference(case, backend):
    """Outputs and gradients at the chunkwise path's real chunk sizes (the conformance check, which
    holds packed calls to one call per sequence, runs a few tokens)."""
    q, k, v, window, cu_q, cu_k = case
    grad_out = torch.randn(q.shape, generator=torch.Generator().manual_seed(1)).to(q.dtype)

    def run(**kwargs):
        inputs = [t.detach().requires_grad_() for t in (q, k, v)]
        out = sliding_window_attention(*inputs, window, cu_seqlens=cu_q, cu_seqlens_k=cu_k, **kwargs)
        if out.numel():
            out.backward(grad_out)
        return out, [t.grad for t in inputs]

    out, grads = run(backend=backend)
    expected, expected_grads = run(backend="reference")
    assert_close(out, expected, what=f"packed {backend} vs reference")
    for name, got, want in zip("qkv", grads, expected_grads):
        if want is not None:
            assert_close(got, want, what=f"packed {backend} d{name}", scale=3)


@pytest.mark.parametrize("backend", CPU_BACKENDS)
def test_packed_window_semantics(backend):
    """One-hot values expose which keys each query sees: its own sequence's last keys only, the
    queries of each sequence aligned to the end of its keys (lengths 3, 0 and 1 after 2, 4, 3 keys)."""
    q_lengths, k_lengths, window = [3, 0, 1], [5, 4, 4], 3
    k_len = sum(k_lengths)
    q = torch.zeros(1, sum(q_lengths), 1, k_len)
    v = torch.eye(k_len)[None, :, None, :]
    cu_q, cu_k = (torch.tensor([0, *itertools.accumulate(lengths)]) for lengths in (q_lengths, k_lengths))
    out = sliding_window_attention(q, torch.randn(1, k_len, 1, k_len), v, window, backend=backend, cu_seqlens=cu_q,
                                   cu_seqlens_k=cu_k)
    # query -> its sequence's key positions p - window < s <= p, p = key end - queries + index
    seen = [[0, 1, 2], [1, 2, 3], [2, 3, 4], [10, 11, 12]]
    for row, keys in enumerate(seen):
        expected = torch.zeros(k_len)
        expected[keys] = 1 / len(keys)
        torch.testing.assert_close(out[0, row, 0], expected, msg=f"query {row}")


def test_flex_document_mask_matches_the_packed_reference():
    """The flex backend's block mask (document and window), run by flex_attention without compiling
    on CPU; the compiled CUDA path is test_packed_cuda.py's."""
    from torch.nn.attention.flex_attention import flex_attention

    from layerzoo.kernels.sliding_window.flex import _flex_packed_block_mask

    gen = torch.Generator().manual_seed(0)
    q_lengths, k_lengths = [1, 70, 0, 9], [40, 90, 3, 9]
    q = torch.randn(1, sum(q_lengths), 2, 8, generator=gen)
    k, v = (torch.randn(1, sum(k_lengths), 1, 8, generator=gen) for _ in range(2))
    cu_q, cu_k = ([0, *itertools.accumulate(lengths)] for lengths in (q_lengths, k_lengths))
    for window in (None, 1, 17):
        mask = _flex_packed_block_mask(cu_q, cu_k, window, q.device)
        with warnings.catch_warnings():  # uncompiled flex_attention warns that it is slow
            warnings.simplefilter("ignore")
            out = flex_attention(*(t.transpose(1, 2) for t in (q, k, v)), block_mask=mask, enable_gqa=True)
        expected = sliding_window_attention(q, k, v, window, backend="reference", cu_seqlens=torch.tensor(cu_q),
                                            cu_seqlens_k=torch.tensor(cu_k))
        assert_close(out.transpose(1, 2), expected, what=f"flex document mask, window {window}")


def test_choose_backend_for_packed_sequences_on_cpu():
    q, k = torch.randn(1, 16, 4, 8), torch.randn(1, 32, 2, 8)
    for window in (8, 32, None):  # the dense mask of sdpa would span every sequence
        assert choose_sliding_window_backend(q, k, window, packed=True) == "chunkwise"
    assert choose_sliding_window_backend(q, k, 8, backend="sdpa", packed=True) == "sdpa"


@pytest.mark.parametrize("window", [None, 17])
def test_auto_runs_long_packed_sequences_one_by_one_off_cuda(monkeypatch, window):
    """Few long sequences (a padded batch's prefill) skip the chunkwise grid, whose per-chunk key
    gathers cost more there than one fused call per sequence; decode-like ones stay on it."""
    import layerzoo.kernels.sliding_window.chunkwise as chunkwise

    def no_grid(*args, **kwargs):
        raise AssertionError("the packed grid ran")

    monkeypatch.setattr(chunkwise, "sliding_window_attention_packed", no_grid)
    gen = torch.Generator().manual_seed(0)
    q_lengths, k_lengths = [110, 0, 90], [130, 5, 90]
    q = torch.randn(1, sum(q_lengths), 4, 8, generator=gen)
    k, v = (torch.randn(1, sum(k_lengths), 2, 8, generator=gen) for _ in range(2))
    cu_q, cu_k = (torch.tensor([0, *itertools.accumulate(lengths)]) for lengths in (q_lengths, k_lengths))
    out = sliding_window_attention(q, k, v, window, cu_seqlens=cu_q, cu_seqlens_k=cu_k)
    expected = sliding_window_attention(q, k, v, window, backend="reference", cu_seqlens=cu_q, cu_seqlens_k=cu_k)
    assert_close(out, expected, what=f"long packed sequences one by one, window {window}")
    with pytest.raises(AssertionError, match="the packed grid ran"):  # one query per sequence: the grid
        sliding_window_attention(q[:, :3], k, v, window, cu_seqlens=torch.arange(4), cu_seqlens_k=cu_k)


def _packed(q_lengths, k_lengths=None, batch=1):
    k_lengths = q_lengths if k_lengths is None else k_lengths
    offsets = [torch.tensor([0, *itertools.accumulate(lengths)]) for lengths in (q_lengths, k_lengths)]
    q, k = torch.zeros(batch, sum(q_lengths), 4, 8), torch.zeros(batch, sum(k_lengths), 2, 8)
    return (q, k, k), {"cu_seqlens": offsets[0], "cu_seqlens_k": offsets[1]}


@pytest.mark.parametrize(
    "inputs,kwargs,match",
    [
        (_packed([2, 3], [4, 2]), {}, r"sequence 1 has fewer keys than queries \(2 < 3\)"),
        (_packed([2, 3], [4, 5, 0]), {}, r"cu_seqlens_k must give the keys of the same 2 sequences as cu_seqlens, got 3"),
        (_packed([2, 3], [4, 5]), {"cu_seqlens": None}, r"cu_seqlens_k needs cu_seqlens"),
        (_packed([2, 3], [4, 5]), {"cu_seqlens_k": None}, r"with 9 keys for 5 queries, pass cu_seqlens_k"),
        (_packed([2, 3], [4, 5]), {"cu_seqlens_k": torch.tensor([0, 4, 10])},
         r"cu_seqlens_k must run from 0 to Tk = 9, got \[0, 4, 10\]"),
        (_packed([2, 3], batch=2), {}, r"the batch size must be 1, got 2"),
    ],
)
def test_packed_inputs_particular_to_attention_get_one_line_errors(inputs, kwargs, match):
    options = {**inputs[1], **kwargs}
    with pytest.raises(ValueError, match=match) as info:
        sliding_window_attention(*inputs[0], 4, **options)
    assert "\n" not in str(info.value)


def _inputs(q_shape=(1, 6, 4, 8), k_shape=(1, 8, 2, 8)):
    return torch.zeros(q_shape), torch.zeros(k_shape), torch.zeros(k_shape)


@pytest.mark.parametrize(
    "inputs,kwargs,match",
    [
        (_inputs(k_shape=(1, 8, 3, 8)), {}, r"query heads \(4\) must be a multiple of .* heads \(3\)"),
        (_inputs(k_shape=(1, 5, 2, 8)), {}, r"fewer keys than queries \(5 < 6\)"),
        (_inputs(), {"backend": "chunkwize"}, r"unknown .* backend 'chunkwize'; did you mean 'chunkwise'\?"),
        (_inputs(), {"backend": "flex"}, r"'flex' backend needs CUDA tensors"),
    ],
)
def test_inputs_particular_to_attention_get_one_line_errors(inputs, kwargs, match):
    kwargs = {"window": 4, **kwargs}
    with pytest.raises(ValueError, match=match) as info:
        sliding_window_attention(*inputs, kwargs.pop("window"), **kwargs)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("window", [0, -3, 2.5, True, "8"])
def test_a_bad_window_is_the_option_error_the_window_option_raises(window):
    """Called on its own, the kernel refuses a window as a spec, a mixer or set_window would: an
    OptionError (a ValueError) on the key `window`, one line."""
    with pytest.raises(OptionError) as info:
        sliding_window_attention(*_inputs(), window)
    assert info.value.key == "window"
    assert str(info.value) == f"window: sliding_window_attention takes an int >= 1 or None (unbounded), got {window!r}"
    with pytest.raises(OptionError):
        choose_sliding_window_backend(*_inputs()[:2], window)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("backend", ["flex", "sdpa", "auto"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cuda_backends_match_reference(backend, dtype):
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 300, 4, 64, generator=gen)
    k, v = (torch.randn(2, 420, 2, 64, generator=gen) for _ in range(2))
    q, k, v = (t.to("cuda", dtype).requires_grad_() for t in (q, k, v))
    out = sliding_window_attention(q, k, v, 100, backend=backend)
    expected = sliding_window_attention_reference(q, k, v, 100)
    assert_close(out, expected, what=backend, scale=CUDA_TOLERANCE_SCALE[dtype])
    grad_out = torch.randn_like(out)
    grads = torch.autograd.grad(out, (q, k, v), grad_out)
    expected_grads = torch.autograd.grad(expected, (q, k, v), grad_out)
    for name, got, want in zip("qkv", grads, expected_grads):
        assert_close(got, want, what=f"{backend} d{name}", scale=CUDA_TOLERANCE_SCALE[dtype])


@pytest.mark.skipif(not native_enabled(), reason="the compiled kernel did not build")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_native_fakes_agree_with_the_compiled_ops(dtype):
    """torch.library.opcheck: the fakes torch.compile and torch.export trace with (native.py) give
    the compiled ops' shapes, dtypes and strides, and both ops trace with dynamic shapes; GQA, more
    keys than queries, a partial last block, q a strided view."""
    ops = load_native_ops()
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 37, 8, generator=gen, dtype=dtype).transpose(1, 2)
    k, v = (torch.randn(1, 45, 2, 8, generator=gen, dtype=dtype) for _ in range(2))
    torch.library.opcheck(ops.sliding_window_forward, (q, k, v, 5, 0.3, 32))
    out, lse = ops.sliding_window_forward(q, k, v, 5, 0.3, 32)
    torch.library.opcheck(ops.sliding_window_backward, (q, k, v, out, lse, torch.randn_like(out), 5, 0.3, 32))
