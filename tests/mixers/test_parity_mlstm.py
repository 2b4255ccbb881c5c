"""layerzoo's `mlstm` mixer equals transformers' xLSTM mLSTM layer (xLSTMLayer, xLSTM-7B's layout),
weights copied through the mappings of tests/helpers/hf_mlstm.py (written out in docs/parity.md):
outputs, final states (C, n in one stabiliser's frame: the true state up to a common factor) and
the gradients of the input and every mapped parameter, at fp32 tolerance.

transformers runs its native PyTorch kernels (no `xlstm` package, fp32: see the helper), chunkwise
over whole chunks and the step loop over the rest, so both of its paths are compared.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("transformers")

from layerzoo.mixers import MLSTM
from layerzoo.testing import assert_close

from tests.helpers import hf_mlstm
from tests.helpers.init_stats import assert_follows, follows, linear_default_cdf, normal_cdf
from tests.helpers.layer_parity import compare_gradients, load_theirs_into_ours, loss_weights, mapped_from, randomise

@st.composite
def cases(draw, d_model: int = 16, qk_dim_factors=(0.25, 0.5, 1.0)):
    return {
        "d_model": d_model,
        "n_heads": draw(st.sampled_from([1, 2, 4])),
        "qk_dim_factor": draw(st.sampled_from(qk_dim_factors)),
        "v_dim_factor": draw(st.sampled_from([0.5, 1.0, 2.0])),
        "gate_soft_cap": draw(st.sampled_from([None, 15.0, 5.0])),
        "chunk_size": draw(st.sampled_from([2, 4, 8])),
        "weight_mode": draw(st.sampled_from(["single", "fused"])),
        "batch": draw(st.integers(1, 2)), "length": draw(st.integers(1, 20)),
        "seed": draw(st.integers(0, 2**31 - 1)),
    }


def true_state_in_frame(C, n, m, m_ref):
    """C exp(m - m_ref), n exp(m - m_ref): differentiable in m too, m_ref a constant."""
    factor = torch.exp(m - m_ref)
    return C * factor[..., None, None], n * factor[..., None]


def check_parity(case, dtype):
    options = {key: case[key] for key in ("n_heads", "qk_dim_factor", "v_dim_factor", "gate_soft_cap", "chunk_size")}
    config = hf_mlstm.xlstm_config(case["d_model"], weight_mode=case["weight_mode"], dtype=dtype, **options)
    theirs = hf_mlstm.xlstm_layer(config, dtype=dtype)
    ours = MLSTM(case["d_model"], **options).to(dtype)
    mapping = hf_mlstm.MAPPINGS[case["weight_mode"]]
    gen = torch.Generator().manual_seed(case["seed"])
    randomise(theirs, gen)
    load_theirs_into_ours(ours, theirs, mapping)
    x = torch.randn(case["batch"], case["length"], case["d_model"], generator=gen).to(dtype)
    x_ours, x_theirs = x.clone().requires_grad_(), x.clone().requires_grad_()

    y, state = ours(x_ours, return_state=True)
    y_ref, (C_ref, n_ref, m_ref) = hf_mlstm.run(theirs, x_theirs)
    what = f"mlstm {case}"
    assert_close(y, y_ref, what=f"{what}: output")
    frame = m_ref.detach()
    ours_state = true_state_in_frame(state.C, state.n, state.m, frame)
    their_state = true_state_in_frame(C_ref, n_ref, m_ref, frame)
    for name, got, expected in zip("Cn", ours_state, their_state):
        assert_close(got, expected, what=f"{what}: final {name}")

    weights = loss_weights(y_ref, *their_state)
    sum((t * w).sum() for t, w in zip((y, *ours_state), weights)).backward()
    sum((t * w).sum() for t, w in zip((y_ref, *their_state), weights)).backward()
    assert_close(x_ours.grad, x_theirs.grad, what=f"{what}: dx", scale=10)
    compare_gradients(ours, theirs, mapping, what)


@given(case=cases())
def test_mlstm_equals_xlstm_mlstm_layer_in_fp64(case):
    """Both layers in fp64 (theirs with fp64 states and norms): the same function to rounding."""
    check_parity(case, torch.float64)


# Heads of 8 or more q/k and v channels, as real configurations have (xLSTM-7B: 256, 512). At 1
# or 2 channels a head's LayerNorm of 2 values amplifies fp32's rounding (both sides') into
# gradient differences above fp32 tolerance; the fp64 test covers those widths.
@given(case=cases(d_model=64, qk_dim_factors=(0.5, 1.0)))
def test_mlstm_equals_xlstm_mlstm_layer_in_fp32(case):
    check_parity(case, torch.float32)


# Initialisation against xLSTMPreTrainedModel._init_weights (weight_mode "single", xLSTM-7B's; the
# "fused" mode's init raises in transformers 5.24). Exact: the gates (weights 0, input-gate bias
# -10, forget-gate bias linspace(3, 6) over heads) and the norm weight (1). Different, by KS test:
# q, k, v (theirs "small init" N(0, sqrt(2 / (5 d))), ours nn.Linear's U(+-1/sqrt(d)), std
# 0.079 against 0.072 at d = 64); the output gate's projection (theirs all zero, because its
# name ogate_preact contains "gate", so sigmoid(o) = 0.5 for every token at init; ours
# nn.Linear's); out_proj (theirs "wang init" N(0, 2 / (n_layers sqrt(d))), ours nn.Linear's
# U(+-1/sqrt(v_width))). See docs/parity.md.
INIT_WIDTH, INIT_HEADS, N_LAYERS = 64, 4, 2


def initialised_pair():
    ours = MLSTM(INIT_WIDTH, n_heads=INIT_HEADS)
    config = hf_mlstm.xlstm_config(INIT_WIDTH, INIT_HEADS)
    config.num_hidden_layers = config.num_blocks = N_LAYERS
    return ours, hf_mlstm.xlstm_layer(config), hf_mlstm.SINGLE


def test_gates_and_norm_initialise_exactly_as_xlstm():
    ours, theirs, mapping = initialised_pair()
    their_params = dict(theirs.named_parameters())
    for name in ("gate_proj.weight", "gate_proj.bias", "norm_weight"):
        expected = mapped_from(their_params, mapping[name], ours.get_parameter(name).shape)
        assert torch.equal(ours.get_parameter(name), expected), name


def test_projections_initialise_as_nn_linear_where_xlstm_uses_small_wang_and_zero_inits():
    ours, theirs, _ = initialised_pair()
    q, k, v, o = ours.in_proj.weight.split(ours.widths)
    for name, weight in {"q": q, "k": k, "v": v, "output gate": o, "out_proj": ours.out_proj.weight}.items():
        assert_follows(weight, linear_default_cdf(weight.shape[1]), f"ours {name}")
    small = math.sqrt(2 / (5 * INIT_WIDTH))
    for name in ("q", "k", "v"):
        weight = theirs.get_parameter(f"{name}.weight")
        assert_follows(weight, normal_cdf(small), f"theirs {name}")
        assert not follows(weight, linear_default_cdf(INIT_WIDTH)), f"theirs {name}"
    assert torch.count_nonzero(theirs.ogate_preact.weight) == 0
    assert_follows(theirs.out_proj.weight, normal_cdf(2 / (N_LAYERS * math.sqrt(INIT_WIDTH))), "theirs out_proj")
