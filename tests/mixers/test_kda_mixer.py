"""Kimi Delta Attention mixer: prefill then decode, options, gate init, state layout.

The registry-wide contract (streaming splits, padding and packing, state_size, bf16, gradients,
re-entrancy) is checked by tests/test_conformance.py; these are the checks particular to this mixer.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from layerzoo import get_mixer
from layerzoo.errors import OptionError
from layerzoo.mixers import KimiDeltaAttention
from layerzoo.testing import assert_close, check_mixer, mixer_inputs
from layerzoo.training.config import TrainingConfig
from layerzoo.training.loop.loop import adamw

from tests.helpers.streams import check_prefill_then_decode, delta_rule_layers


@given(mixer=delta_rule_layers(KimiDeltaAttention), x=mixer_inputs(16, max_length=40), data=st.data())
def test_chunked_prefill_then_token_by_token_decode_equals_full_forward(mixer, x, data):
    check_prefill_then_decode(mixer, x, data)


def test_state_layout_and_dtypes():
    mixer = KimiDeltaAttention(32, n_heads=2, head_dim=8, expand_v=1.5, conv_size=3).bfloat16()
    _, state = mixer(torch.randn(3, 5, 32).bfloat16(), return_state=True)
    assert state.q_conv.shape == state.k_conv.shape == (3, 2, 16) and state.v_conv.shape == (3, 2, 24)
    assert state.q_conv.dtype == torch.bfloat16
    assert state.recurrent.shape == (3, 2, 8, 12) and state.recurrent.dtype == torch.float32
    assert mixer.state_size(10**6) == 2 * (16 + 16 + 24) + 2 * 8 * 12


def test_contract_holds_for_other_option_sets():
    check_mixer(KimiDeltaAttention, n_heads=1, head_dim=4, expand_v=2.0, conv_size=1, chunk_size=16)
    check_mixer(KimiDeltaAttention, n_heads=4, use_short_conv=False, chunk_size=3, length=17)


def test_gate_initialisation_and_widths_follow_fla():
    torch.manual_seed(0)
    mixer = KimiDeltaAttention(64, n_heads=4)
    decay_rate = mixer.A_log.exp()
    assert (decay_rate >= 1).all() and (decay_rate <= 16).all()
    assert mixer.dt_bias.shape == (64,) and not mixer.dt_bias.any()  # one per key channel
    decayed = adamw(mixer, TrainingConfig().optimizer).param_groups[0]["params"]
    assert all(p is not mixer.A_log and p is not mixer.dt_bias for p in decayed)
    # the decay and the output gate are low-rank, through head_v_dim channels
    assert [layer.out_features for layer in mixer.f_proj] == [16, 64]
    assert [layer.out_features for layer in mixer.g_proj] == [16, 64] and mixer.g_proj[1].bias is not None


@pytest.mark.parametrize(
    "options,key,match",
    [
        ({"n_heads": 0}, "n_heads", r"^n_heads: must be >= 1, got 0$"),
        ({"n_heads": 3}, "n_heads", r"d_model 32 is not divisible by n_heads 3; set head_dim"),
        ({"head_dim": 8, "expand_v": 0.3}, "expand_v", r"head_dim 8 \* expand_v 0.3 must be a positive integer"),
        ({"conv_size": 0}, "conv_size", r"^conv_size: must be >= 1, got 0$"),
        ({"chunk_size": 0}, "chunk_size", r"^chunk_size: must be >= 1, got 0$"),
        ({"backend": "chunkwize"}, "backend", r"^backend: unknown value 'chunkwize'; did you mean 'chunkwise'\?"),
    ],
)
def test_impossible_options_raise_option_error(options, key, match):
    with pytest.raises(OptionError, match=match) as info:
        get_mixer("kda").check(32, **options)
    assert info.value.key == key and "\n" not in str(info.value)
    with pytest.raises(OptionError):
        KimiDeltaAttention(32, **options)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_matches_flash_linear_attention_layer_on_cuda():
    layers = pytest.importorskip("fla.layers", reason="needs the flash-linear-attention package (fla.layers)")
    torch.manual_seed(0)
    ours = KimiDeltaAttention(128, n_heads=2, head_dim=64).cuda()
    theirs = layers.KimiDeltaAttention(hidden_size=128, head_dim=64, num_heads=2, expand_v=1.0, norm_eps=1e-5).cuda()
    # fla's convolutions are nn.Conv1d subclasses with (channels, 1, width) weights
    theirs.load_state_dict({name: p.view_as(theirs.state_dict()[name]) for name, p in ours.state_dict().items()})
    x = torch.randn(2, 100, 128, device="cuda")
    assert_close(ours(x), theirs(x)[0], torch.float32, what="vs fla's KimiDeltaAttention layer", scale=1000)
