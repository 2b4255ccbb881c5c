"""Gated DeltaNet mixer: prefill then decode equals one pass, options, gate init, state layout.

The registry-wide contract (streaming splits, state_size, bf16, gradients, re-entrancy) is checked
by tests/test_conformance.py; these are the checks particular to this mixer.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from layerzoo import get_mixer
from layerzoo.training.config import TrainingConfig
from layerzoo.training.loop.loop import adamw
from layerzoo.errors import OptionError
from layerzoo.mixers import GatedDeltaNet
from layerzoo.testing import assert_close, check_mixer, mixer_inputs

from tests.helpers.streams import check_prefill_then_decode, delta_rule_layers


@given(mixer=delta_rule_layers(GatedDeltaNet), x=mixer_inputs(16, max_length=40), data=st.data())
def test_chunked_prefill_then_token_by_token_decode_equals_full_forward(mixer, x, data):
    check_prefill_then_decode(mixer, x, data)


def test_state_layout_and_dtypes():
    mixer = GatedDeltaNet(32, n_heads=2, head_dim=8, expand_v=1.5, conv_size=3).bfloat16()
    _, state = mixer(torch.randn(3, 5, 32).bfloat16(), return_state=True)
    assert state.q_conv.shape == state.k_conv.shape == (3, 2, 16)
    assert state.v_conv.shape == (3, 2, 24)
    assert state.q_conv.dtype == torch.bfloat16
    assert state.recurrent.shape == (3, 2, 8, 12) and state.recurrent.dtype == torch.float32
    assert mixer.state_size(10**6) == 2 * (16 + 16 + 24) + 2 * 8 * 12
    no_conv = GatedDeltaNet(32, n_heads=2, use_short_conv=False)
    _, state = no_conv(torch.randn(1, 4, 32), return_state=True)
    assert state.q_conv is None and no_conv.state_size(4) == 2 * 16 * 32


def test_contract_holds_for_other_option_sets():
    check_mixer(GatedDeltaNet, n_heads=1, head_dim=4, expand_v=1.0, conv_size=1, chunk_size=16)
    check_mixer(GatedDeltaNet, n_heads=4, use_short_conv=False, chunk_size=3, length=17)


def test_gate_initialisation_follows_mamba2():
    torch.manual_seed(0)
    mixer = GatedDeltaNet(64, n_heads=64)
    decay_rate = mixer.A_log.exp()
    dt = F.softplus(mixer.dt_bias)
    assert (decay_rate > 0).all() and (decay_rate <= 16).all()
    assert (dt >= 1e-3 * (1 - 1e-5)).all() and (dt <= 0.1 * (1 + 1e-5)).all()
    decayed = adamw(mixer, TrainingConfig().optimizer).param_groups[0]["params"]
    assert all(p is not mixer.A_log and p is not mixer.dt_bias for p in decayed)  # rates are not weights to shrink
    # log-uniform dt: its log spreads over most of [log 1e-3, log 0.1]
    assert dt.log().max() - dt.log().min() > 0.7 * (math.log(0.1) - math.log(1e-3))


def test_default_widths():
    mixer = GatedDeltaNet(64, n_heads=4)
    assert (mixer.head_dim, mixer.head_v_dim) == (16, 32)
    assert mixer.q_proj.out_features == 64 and mixer.v_proj.out_features == mixer.g_proj.out_features == 128


@pytest.mark.parametrize(
    "options,key,match",
    [
        ({"n_heads": 0}, "n_heads", r"^n_heads: must be >= 1, got 0$"),
        ({"n_heads": 3}, "n_heads", r"d_model 32 is not divisible by n_heads 3; set head_dim"),
        ({"head_dim": 0}, "head_dim", r"^head_dim: must be >= 1, got 0$"),
        ({"head_dim": 8, "expand_v": 0.3}, "expand_v", r"head_dim 8 \* expand_v 0.3 must be a positive integer"),
        ({"expand_v": -1.0}, "expand_v", r"^expand_v: must be > 0.0, got -1.0$"),
        ({"conv_size": 0}, "conv_size", r"^conv_size: must be >= 1, got 0$"),
        ({"norm_eps": 0.0}, "norm_eps", r"^norm_eps: must be > 0.0, got 0.0$"),
        ({"chunk_size": 0}, "chunk_size", r"^chunk_size: must be >= 1, got 0$"),
        ({"backend": "chunkwize"}, "backend", r"^backend: unknown value 'chunkwize'; did you mean 'chunkwise'\?"),
    ],
)
def test_impossible_options_raise_option_error(options, key, match):
    with pytest.raises(OptionError, match=match) as info:
        get_mixer('gated_deltanet').check(32, **options)
    assert info.value.key == key
    with pytest.raises(OptionError):
        GatedDeltaNet(32, **options)
    get_mixer('gated_deltanet').check(32, n_heads=3, head_dim=8)  # head_dim frees d_model from n_heads


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_matches_flash_linear_attention_layer_on_cuda():
    from fla.layers import GatedDeltaNet as FlaGatedDeltaNet

    torch.manual_seed(0)
    ours = GatedDeltaNet(128, n_heads=2, head_dim=64).cuda()
    theirs = FlaGatedDeltaNet(hidden_size=128, head_dim=64, num_heads=2, expand_v=2.0, norm_eps=1e-5).cuda()
    # fla's convolutions are nn.Conv1d subclasses with (channels, 1, width) weights
    weights = {name: p.view_as(theirs.state_dict()[name]) for name, p in ours.state_dict().items()}
    theirs.load_state_dict(weights)
    x = torch.randn(2, 100, 128, device="cuda")
    expected = theirs(x)[0]
    assert_close(ours(x), expected, torch.float32, what="vs fla's GatedDeltaNet layer", scale=1000)
