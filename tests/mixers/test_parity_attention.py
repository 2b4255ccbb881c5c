"""layerzoo's `attention` and `swa` mixers equal transformers' attention layers, weights copied
through the mappings of tests/helpers/hf_attention.py (written out in docs/parity.md):

- plain attention with GQA and RoPE = Llama's LlamaAttention;
- sliding-window attention = Mistral's (Llama's layer, transformers' sliding-window mask and cache);
- qk-norm and the output gate = Qwen3-Next's gated attention (rotating whole heads:
  partial_rotary_factor 1.0, layerzoo has no partial RoPE).

Outputs, the KV caches each leaves (keys after RoPE; a window keeps the last window-1), and the
gradients of the input and of every mapped parameter, at fp32 tolerance. transformers runs eager
attention, pure PyTorch: attention has no fla kernel to switch off.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

from layerzoo.mixers.attention import Attention, SlidingWindowAttention
from layerzoo.testing import assert_close

from tests.helpers import hf_attention
from tests.helpers.layer_parity import compare_gradients, load_theirs_into_ours, loss_weights, randomise

D_MODEL = 16
HEADS = st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 1), (8, 2)])  # (n_heads, n_kv_heads)


@st.composite
def cases(draw, windowed: bool):
    n_heads, n_kv_heads = draw(HEADS)
    return {
        "n_heads": n_heads, "n_kv_heads": n_kv_heads,
        "theta": draw(st.sampled_from([10000.0, 500.0])),
        "window": draw(st.integers(1, 8)) if windowed else None,
        "batch": draw(st.integers(1, 2)), "length": draw(st.integers(1, 12)),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def check_parity(ours, theirs, rotary, config, mapping, case):
    gen = torch.Generator().manual_seed(case["seed"])
    randomise(theirs, gen)
    load_theirs_into_ours(ours, theirs, mapping)
    x = torch.randn(case["batch"], case["length"], D_MODEL, generator=gen)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    y, cache = ours(x_ours, return_state=True)
    y_ref, k_ref, v_ref = hf_attention.run(theirs, rotary, config, x_theirs)
    what = f"{type(ours).__name__} {case}"
    assert_close(y, y_ref, what=f"{what}: output")
    assert_close(cache.k, k_ref, what=f"{what}: cached keys")
    assert_close(cache.v, v_ref, what=f"{what}: cached values")
    weights = loss_weights(y_ref, k_ref, v_ref)
    sum((t * w).sum() for t, w in zip((y, cache.k, cache.v), weights)).backward()
    sum((t * w).sum() for t, w in zip((y_ref, k_ref, v_ref), weights)).backward()
    assert_close(x_ours.grad, x_theirs.grad, what=f"{what}: dx", scale=10)
    compare_gradients(ours, theirs, mapping, what)


def ours_for(case, **options):
    cls = Attention if case["window"] is None else SlidingWindowAttention
    window = {} if case["window"] is None else {"window": case["window"]}
    return cls(D_MODEL, n_heads=case["n_heads"], n_kv_heads=case["n_kv_heads"], rope_theta=case["theta"],
               **window, **options)


@given(case=cases(windowed=False))
def test_attention_equals_llama_attention(case):
    theirs, rotary, config = hf_attention.llama(D_MODEL, case["n_heads"], case["n_kv_heads"], case["theta"])
    check_parity(ours_for(case), theirs, rotary, config, hf_attention.LLAMA, case)


@given(case=cases(windowed=True))
def test_swa_equals_mistral_sliding_window_attention(case):
    theirs, rotary, config = hf_attention.llama(D_MODEL, case["n_heads"], case["n_kv_heads"], case["theta"],
                                                window=case["window"])
    check_parity(ours_for(case), theirs, rotary, config, hf_attention.LLAMA, case)


@given(case=cases(windowed=False) | cases(windowed=True))
def test_gated_qk_normed_attention_equals_qwen3_next_attention(case):
    theirs, rotary, config = hf_attention.qwen3_next(D_MODEL, case["n_heads"], case["n_kv_heads"], case["theta"],
                                                     window=case["window"])
    mapping = hf_attention.qwen3_next_mapping(case["n_heads"], D_MODEL // case["n_heads"])
    check_parity(ours_for(case, qk_norm=True, output_gate=True), theirs, rotary, config, mapping, case)
