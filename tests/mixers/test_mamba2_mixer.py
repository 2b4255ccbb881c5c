"""Mamba-2 mixer: its recurrence written out, prefill then decode, options, init, state layout.

The registry-wide contract (streaming splits, padding and packing, state_size, bf16, gradients,
re-entrancy) is checked by tests/test_conformance.py; these are the checks particular to this mixer.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given
from hypothesis import strategies as st

from layerzoo import get_mixer
from layerzoo.errors import OptionError
from layerzoo.mixers import Mamba2
from layerzoo.testing import assert_close, check_mixer, mixer_inputs
from layerzoo.training.config import TrainingConfig
from layerzoo.training.loop.loop import adamw

from tests.helpers.streams import check_prefill_then_decode


@st.composite
def small_mixer(draw, d_model: int = 16) -> Mamba2:
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    head_dim = draw(st.sampled_from([4, 8]))
    n_heads = 2 * d_model // head_dim
    return Mamba2(d_model, head_dim=head_dim, d_state=draw(st.sampled_from([2, 8])),
                  n_groups=draw(st.sampled_from([g for g in (1, 2, 4) if n_heads % g == 0])),
                  conv_size=draw(st.integers(1, 4)), chunk_size=draw(st.sampled_from([4, 16, 64])))


def mamba2_step_by_step(mixer: Mamba2, x: torch.Tensor) -> torch.Tensor:
    """Mamba-2 as its paper writes it, in fp64, one token at a time from the empty state:
    h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t^T, y_t = h_t^T C_t + D x_t (B, C shared by a group's
    heads), then RMSNorm(y * SiLU(z)) per group and out_proj."""
    mixer = mixer.double()
    z, xbc, dt = mixer.in_proj(x.double()).split([mixer.d_inner, mixer.conv_dim, mixer.n_heads], dim=-1)
    xbc, _ = mixer.conv1d(xbc)
    values, B, C = xbc.split([mixer.d_inner, mixer.n_groups * mixer.d_state, mixer.n_groups * mixer.d_state], dim=-1)
    values = values.unflatten(-1, (mixer.n_heads, mixer.head_dim))
    group = torch.arange(mixer.n_heads) // (mixer.n_heads // mixer.n_groups)
    B, C = (t.unflatten(-1, (mixer.n_groups, mixer.d_state))[:, :, group] for t in (B, C))
    dt = F.softplus(dt + mixer.dt_bias)
    A = -mixer.A_log.exp()
    h = x.new_zeros(x.shape[0], mixer.n_heads, mixer.d_state, mixer.head_dim, dtype=torch.float64)
    ys = []
    for t in range(x.shape[1]):
        h = (dt[:, t] * A).exp()[..., None, None] * h + dt[:, t, :, None, None] * B[:, t, ..., None] * values[:, t, :, None, :]
        ys.append(torch.einsum("bhnp,bhn->bhp", h, C[:, t]) + mixer.D[:, None] * values[:, t])
    y = torch.stack(ys, dim=1).flatten(2)
    out = mixer.out_proj(mixer.norm(y * F.silu(z)))
    mixer.float()
    return out


@pytest.mark.parametrize("n_groups", [1, 2])
def test_the_mixer_is_mamba2s_recurrence(n_groups):
    """The ssd mapping (g = dt A, k = dt B, q = C, v = x, scale 1) is Mamba-2's recurrence."""
    torch.manual_seed(0)
    mixer = Mamba2(16, head_dim=8, d_state=4, n_groups=n_groups, chunk_size=4)
    x = torch.randn(2, 11, 16)
    assert_close(mixer(x).double(), mamba2_step_by_step(mixer, x), torch.float32, what="vs Mamba-2 step by step")


@given(mixer=small_mixer(), x=mixer_inputs(16, max_length=40), data=st.data())
def test_chunked_prefill_then_token_by_token_decode_equals_full_forward(mixer, x, data):
    check_prefill_then_decode(mixer, x, data)


def test_state_layout_and_dtypes():
    mixer = Mamba2(32, head_dim=16, d_state=8, n_groups=2, conv_size=3).bfloat16()
    _, state = mixer(torch.randn(3, 5, 32).bfloat16(), return_state=True)
    conv_width = 64 + 2 * 2 * 8  # x, then B and C of two groups
    assert state.conv.shape == (3, 2, conv_width) and state.conv.dtype == torch.bfloat16
    assert state.ssm.shape == (3, 4, 8, 16) and state.ssm.dtype == torch.float32
    assert mixer.state_size(10**6) == 2 * conv_width + 4 * 8 * 16


def test_contract_holds_for_other_option_sets():
    check_mixer(Mamba2, head_dim=8, d_state=4, n_groups=2, conv_size=2, chunk_size=3, length=17)
    check_mixer(Mamba2, head_dim=32, d_state=16, expand=1, conv_size=1, chunk_size=16)


def test_initialisation_follows_mamba2():
    torch.manual_seed(0)
    mixer = Mamba2(64, head_dim=2, dt_min=1e-3, dt_max=0.1)
    decay_rate = mixer.A_log.exp()
    dt = F.softplus(mixer.dt_bias)
    assert (decay_rate >= 1).all() and (decay_rate <= 16).all()
    assert (dt >= 1e-3 * (1 - 1e-5)).all() and (dt <= 0.1 * (1 + 1e-5)).all()
    assert dt.log().max() - dt.log().min() > 0.7 * (math.log(0.1) - math.log(1e-3))  # log-uniform
    assert torch.equal(mixer.D, torch.ones(64))
    decayed = adamw(mixer, TrainingConfig().optimizer).param_groups[0]["params"]
    assert all(p is not mixer.A_log and p is not mixer.dt_bias and p is not mixer.D for p in decayed)


def test_default_widths_are_mamba2s():
    mixer = Mamba2(256)
    assert (mixer.d_inner, mixer.n_heads, mixer.head_dim, mixer.d_state) == (512, 8, 64, 128)
    assert mixer.in_proj.out_features == 2 * 512 + 2 * 128 + 8


@pytest.mark.parametrize(
    "options,key,match",
    [
        ({"head_dim": 0}, "head_dim", r"^head_dim: must be >= 1, got 0$"),
        ({"head_dim": 5}, "head_dim", r"d_inner = expand \* d_model = 64 is not divisible by head_dim 5"),
        ({"n_groups": 3}, "n_groups", r"the 4 heads .* are not divisible by n_groups 3"),
        ({"d_state": 0}, "d_state", r"^d_state: must be >= 1, got 0$"),
        ({"conv_size": 0}, "conv_size", r"^conv_size: must be >= 1, got 0$"),
        ({"dt_min": 0.2}, "dt_min", r"need 0 < dt_min <= dt_max"),
        ({"norm_eps": 0.0}, "norm_eps", r"^norm_eps: must be > 0.0, got 0.0$"),
        ({"chunk_size": 0}, "chunk_size", r"^chunk_size: must be >= 1, got 0$"),
        ({"backend": "chunkwize"}, "backend", r"^backend: unknown value 'chunkwize'; did you mean 'chunkwise'\?"),
    ],
)
def test_impossible_options_raise_option_error(options, key, match):
    with pytest.raises(OptionError, match=match) as info:
        get_mixer("mamba2").check(32, **{"head_dim": 16, **options})
    assert info.value.key == key and "\n" not in str(info.value)
    with pytest.raises(OptionError):
        Mamba2(32, **{"head_dim": 16, **options})
