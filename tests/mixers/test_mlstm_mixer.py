"""mLSTM mixer: prefill then decode equals one pass, backends agree, options, gate init, state layout.

The registry-wide contract (streaming splits, state_size, bf16, gradients, re-entrancy) is checked
by tests/test_conformance.py; these are the checks particular to this mixer.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo.kernels import MLSTMState
from layerzoo import get_mixer
from layerzoo.errors import OptionError
from layerzoo.mixers import MLSTM
from layerzoo.testing import assert_close, check_mixer, mixer_inputs

from tests.helpers.streams import check_prefill_then_decode

D_MODEL = 16


mixer_options = st.fixed_dictionaries({
    "n_heads": st.sampled_from([1, 2, 4]),
    "qk_dim_factor": st.sampled_from([0.25, 0.5, 1.0]),
    "v_dim_factor": st.sampled_from([0.5, 1.0, 2.0]),
    "gate_soft_cap": st.sampled_from([None, 15.0, 5.0]),
    "chunk_size": st.sampled_from([1, 4, 16, 64]),
})


def build(options: dict, seed: int = 0, backend: str = "auto") -> MLSTM:
    """A seeded mLSTM whose gates depend on the input (the init's zero gate weights would not)."""
    torch.manual_seed(seed)
    mixer = MLSTM(D_MODEL, **options, backend=backend)
    with torch.no_grad():
        mixer.gate_proj.weight.normal_(0, 0.5)
    return mixer


@given(options=mixer_options, x=mixer_inputs(D_MODEL, max_length=40), data=st.data())
def test_chunked_prefill_then_token_by_token_decode_equals_full_forward(options, x, data):
    check_prefill_then_decode(build(options), x, data)


@given(options=mixer_options, x=mixer_inputs(D_MODEL, max_length=40))
def test_reference_and_chunkwise_backends_agree(options, x):
    with torch.no_grad():
        chunkwise = build(options, backend="chunkwise")(x)
        reference = build(options, backend="reference")(x)
    assert_close(chunkwise, reference, what="chunkwise vs reference mixer", scale=10)


def test_widths_and_gate_initialisation_follow_xlstm_7b():
    mixer = MLSTM(64, n_heads=4)
    assert (mixer.key_dim, mixer.value_dim) == (8, 16)  # q, k: 0.5 * d_model; v, output gate: d_model
    assert mixer.in_proj.out_features == 32 + 32 + 64 + 64 and mixer.in_proj.bias is None
    assert mixer.out_proj.in_features == 64 and mixer.out_proj.bias is None
    assert not mixer.gate_proj.weight.any()
    input_bias, forget_bias = mixer.gate_proj.bias.detach().chunk(2)
    assert torch.equal(input_bias, torch.full((4,), -10.0))
    assert torch.equal(forget_bias, torch.linspace(3.0, 6.0, 4))


@pytest.mark.parametrize("cap", [15.0, 2.0, None])
def test_gate_preactivations_are_soft_capped_and_fp32(cap):
    torch.manual_seed(0)
    mixer = MLSTM(D_MODEL, n_heads=2, gate_soft_cap=cap).bfloat16()
    with torch.no_grad():
        mixer.gate_proj.weight.normal_(0, 10)
    x = 100 * torch.randn(2, 50, D_MODEL).bfloat16()
    input_gate, forget_gate = mixer.gate_preactivations(x)
    assert input_gate.shape == forget_gate.shape == (2, 50, 2)
    assert input_gate.dtype == forget_gate.dtype == torch.float32
    largest = torch.cat((input_gate, forget_gate)).abs().max().item()
    assert largest <= cap if cap is not None else largest > 100


def test_state_layout_dtypes_and_size():
    mixer = MLSTM(32, n_heads=2, qk_dim_factor=0.25, v_dim_factor=1.5).bfloat16()
    y, state = mixer(torch.randn(3, 7, 32).bfloat16(), return_state=True)
    assert y.dtype == torch.bfloat16 and isinstance(state, MLSTMState)
    assert [tuple(t.shape) for t in state] == [(3, 2, 4, 24), (3, 2, 4), (3, 2)]
    assert all(t.dtype == torch.float32 for t in state)
    assert mixer.state_size(1) == mixer.state_size(10**6) == 2 * (4 * 24 + 4 + 1)
    empty = mixer.init_state(3)
    assert all(not t.any() and t.dtype == torch.float32 for t in empty)


def test_contract_holds_for_other_option_sets():
    check_mixer(MLSTM, n_heads=1, qk_dim_factor=0.25, v_dim_factor=2.0, chunk_size=3, length=17)
    check_mixer(MLSTM, n_heads=4, gate_soft_cap=None, backend="reference")


@pytest.mark.parametrize(
    "options,key,match",
    [
        ({"n_heads": 0}, "n_heads", r"^n_heads: must be >= 1, got 0$"),
        ({"n_heads": 3}, "n_heads", r"qk_dim_factor \* d_model = 16 is not divisible by n_heads 3"),
        ({"qk_dim_factor": 0.3}, "qk_dim_factor", r"qk_dim_factor \* d_model = 0.3 \* 32 = 9.6 must be a positive integer"),
        ({"v_dim_factor": 0.0}, "v_dim_factor", r"^v_dim_factor: must be > 0.0, got 0.0$"),
        ({"v_dim_factor": 0.75, "n_heads": 16}, "n_heads", r"v_dim_factor \* d_model = 24 is not divisible by n_heads 16"),
        ({"gate_soft_cap": 0.0}, "gate_soft_cap", r"^gate_soft_cap: must be > 0.0, got 0.0$"),
        ({"chunk_size": 0}, "chunk_size", r"^chunk_size: must be >= 1, got 0$"),
        ({"backend": "chunkwize"}, "backend", r"^backend: unknown value 'chunkwize'; did you mean 'chunkwise'\?"),
        ({"norm_eps": 0.0}, "norm_eps", r"^norm_eps: must be > 0.0, got 0.0$"),
    ],
)
def test_impossible_options_raise_option_error(options, key, match):
    with pytest.raises(OptionError, match=match) as info:
        get_mixer('mlstm').check(32, **options)
    assert info.value.key == key and "\n" not in str(info.value)
    with pytest.raises(OptionError):
        MLSTM(32, **options)
    get_mixer('mlstm').check(100, n_heads=5, qk_dim_factor=0.3)  # 0.3 * 100 is 30 up to float rounding
