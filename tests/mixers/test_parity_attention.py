"""layerzoo's `attention` and `swa` mixers equal transformers' attention layers, weights copied
through the mappings of tests/helpers/hf_attention.py (written out in docs/parity.md):

- plain attention with GQA and RoPE = Llama's LlamaAttention;
- sliding-window attention = Mistral's (Llama's layer, transformers' sliding-window mask and cache);
- qkv_bias = Qwen2's attention; qk_norm with qk_norm_eps and a head_dim of its own = Qwen3's;
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

from tests.helpers import hf_attention
from tests.helpers.init_stats import assert_follows, follows, linear_default_cdf, normal_cdf
from tests.helpers.parity_mapping import assert_same_layer, in_our_names, load_theirs_into_ours, randomise

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

    def forward(x_ours, x_theirs):
        y, cache = ours(x_ours, return_state=True)
        y_ref, k_ref, v_ref = hf_attention.run(theirs, rotary, config, x_theirs)
        return ({"output": y, "cached keys": cache.k, "cached values": cache.v},
                {"output": y_ref, "cached keys": k_ref, "cached values": v_ref})

    assert_same_layer(ours, theirs, mapping, x, forward, what=f"{type(ours).__name__} {case}")


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


@given(case=cases(windowed=False))
def test_qkv_bias_equals_qwen2_attention(case):
    theirs, rotary, config = hf_attention.qwen2(D_MODEL, case["n_heads"], case["n_kv_heads"], case["theta"])
    check_parity(ours_for(case, qkv_bias=True), theirs, rotary, config, hf_attention.QWEN2, case)


@given(case=cases(windowed=False), head_dim=st.sampled_from([2, 6, 8, 12]), eps=st.sampled_from([1e-6, 1e-5, 0.1]))
def test_qk_norm_and_own_head_dim_equal_qwen3_attention(case, head_dim, eps):
    """head_dim apart from d_model // n_heads (wider or narrower heads than d_model), qk-norm's
    epsilon that of the model's norms."""
    theirs, rotary, config = hf_attention.qwen3(D_MODEL, case["n_heads"], case["n_kv_heads"], head_dim,
                                                case["theta"], eps)
    ours = ours_for(case, head_dim=head_dim, qk_norm=True, qk_norm_eps=eps)
    check_parity(ours, theirs, rotary, config, hf_attention.QWEN3, case)


@given(case=cases(windowed=False) | cases(windowed=True))
def test_gated_qk_normed_attention_equals_qwen3_next_attention(case):
    theirs, rotary, config = hf_attention.qwen3_next(D_MODEL, case["n_heads"], case["n_kv_heads"], case["theta"],
                                                     window=case["window"])
    mapping = hf_attention.qwen3_next_mapping(case["n_heads"], D_MODEL // case["n_heads"])
    check_parity(ours_for(case, qk_norm=True, output_gate=True), theirs, rotary, config, mapping, case)


# Initialisation. transformers' PreTrainedModel._init_weights draws every nn.Linear from
# N(0, initializer_range = 0.02) whatever its width; layerzoo keeps nn.Linear's default,
# U(+-1/sqrt(fan_in)) (std 1/sqrt(3 fan_in): 0.072 at d_model 64, equal to 0.02 at d_model 833).
# Norm weights agree exactly through the mapping (ours 1, theirs 0 stored as weight - 1).
INIT_WIDTH = 64


def test_projections_initialise_as_nn_linear_where_transformers_draws_n_0_002():
    ours = Attention(INIT_WIDTH, n_heads=4, n_kv_heads=2, qk_norm=True, output_gate=True)
    llama = hf_attention.initialised_llama_attention(INIT_WIDTH, 4, 2, seed=0)
    qwen = hf_attention.initialised_qwen3_next_attention(INIT_WIDTH, 4, 2, seed=0)
    for name in ("q_proj", "kv_proj", "gate_proj", "out_proj"):
        weight = getattr(ours, name).weight
        assert_follows(weight, linear_default_cdf(weight.shape[1]), f"ours {name}")
        assert not follows(weight, normal_cdf(0.02)), f"ours {name} now initialises as transformers does: update docs/parity.md"
    for layer in (llama, qwen):
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            assert_follows(getattr(layer, name).weight, normal_cdf(0.02), f"{type(layer).__name__} {name}")
            assert getattr(layer, name).bias is None


def test_qk_norm_weights_initialise_to_the_same_function_as_qwen3_next():
    ours = Attention(INIT_WIDTH, n_heads=4, n_kv_heads=2, qk_norm=True, output_gate=True)
    theirs = hf_attention.initialised_qwen3_next_attention(INIT_WIDTH, 4, 2, seed=0)
    mapping = hf_attention.qwen3_next_mapping(4, INIT_WIDTH // 4)
    expected = in_our_names(ours, theirs, mapping)
    for name in ("q_norm.weight", "k_norm.weight"):
        assert torch.equal(ours.get_parameter(name), expected[name]), name


def test_rope_frequencies_agree_with_llamas_to_an_ulp_ours_rounded_from_fp64():
    """theta^(-2i/D): ours computed in fp64 then rounded to fp32, Llama's in fp32 (a few entries
    one ulp off); ours is the correctly rounded value."""
    ours = Attention(INIT_WIDTH, n_heads=4, rope_theta=500.0).rotary.inv_freq
    theirs = hf_attention.llama(INIT_WIDTH, 4, 4, theta=500.0)[1].inv_freq
    exact = 500.0 ** (-torch.arange(0, INIT_WIDTH // 4, 2, dtype=torch.float64) / (INIT_WIDTH // 4))
    torch.testing.assert_close(ours, theirs, rtol=2.5e-7, atol=0)
    assert torch.equal(ours, exact.float())
