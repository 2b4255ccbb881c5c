"""Mamba-2's initialisation against transformers' (Mamba2PreTrainedModel._init_weights, run by
building a one-layer Mamba2Model) and mamba_ssm's (its Mamba2 constructor, which layerzoo follows).

Equal: dt_bias (log-uniform step in [dt_min, dt_max], floor 1e-4, inverse softplus), D = 1, the
norm's weight = 1, the conv weight and out_proj U(+-1/sqrt(fan_in)). Different, each side pinned
here so that a change on either is noticed (the reasons are in docs/parity.md, "Mamba-2"): A
(layerzoo and mamba_ssm U(1, 16); transformers 1, 2, ..., n_heads), the conv bias (layerzoo and
mamba_ssm nn.Conv1d's U(+-1/sqrt(width)); transformers zeros) and in_proj (layerzoo and mamba_ssm
nn.Linear's U(+-1/sqrt(d_model)); transformers N(0, initializer_range = 0.1)).

Distributions are compared with Kolmogorov-Smirnov tests (tests/helpers/ks.py) at fixed seeds, so
each verdict is deterministic, against p = 1e-3.
"""

from __future__ import annotations

import math

import pytest
import torch

from layerzoo.mixers import Mamba2

from tests.helpers.hf_mamba2 import config_of
from tests.helpers.ks import assert_drawn_from, assert_same_distribution, normal, uniform

pytest.importorskip("transformers.models.mamba2.modeling_mamba2")

D_MODEL, EXPAND, HEAD_DIM, D_STATE, WIDTH = 128, 2, 1, 16, 4  # 256 heads: enough draws of the per-head rates


@pytest.fixture(scope="module")
def both():
    """(layerzoo's Mamba-2, transformers' Mamba2Mixer as its model initialises it), same sizes."""
    from transformers import Mamba2Model

    torch.manual_seed(0)
    ours = Mamba2(D_MODEL, head_dim=HEAD_DIM, d_state=D_STATE, expand=EXPAND, conv_size=WIDTH)
    torch.manual_seed(1)
    theirs = Mamba2Model(config_of(ours)).layers[0].mixer
    return ours, theirs


def symmetric(bound: float):
    return uniform(-bound, bound)


def test_dt_bias_d_and_norm_weight_are_initialised_alike(both):
    ours, theirs = both
    assert_same_distribution(ours.dt_bias, theirs.dt_bias, "dt_bias")
    step = torch.nn.functional.softplus(ours.dt_bias)
    assert step.min() >= 1e-3 * (1 - 1e-6) and step.max() <= 0.1 * (1 + 1e-6)
    assert_drawn_from(step.log(), uniform(math.log(1e-3), math.log(0.1)), "log dt")
    for name in ("D", "norm.weight"):
        assert torch.equal(ours.get_parameter(name), torch.ones_like(ours.get_parameter(name))), name
        assert torch.equal(theirs.get_parameter(name), torch.ones_like(theirs.get_parameter(name))), name


def test_conv_weight_and_out_proj_are_initialised_alike(both):
    ours, theirs = both
    assert_same_distribution(ours.conv1d.weight, theirs.conv1d.weight, "conv1d.weight")
    assert_drawn_from(ours.conv1d.weight, symmetric(1 / math.sqrt(WIDTH)), "conv1d.weight")
    assert_same_distribution(ours.out_proj.weight, theirs.out_proj.weight, "out_proj.weight")
    assert_drawn_from(ours.out_proj.weight, symmetric(1 / math.sqrt(EXPAND * D_MODEL)), "out_proj.weight")


def test_a_differs_uniform_here_one_to_n_heads_in_transformers(both):
    ours, theirs = both
    n_heads = ours.n_heads
    assert torch.allclose(theirs.A_log.exp(), torch.arange(1, n_heads + 1, dtype=torch.float32))
    assert_drawn_from(ours.A_log.exp(), uniform(1, 16), "A")


def test_conv_bias_differs_uniform_here_zero_in_transformers(both):
    ours, theirs = both
    assert not theirs.conv1d.bias.any()
    assert_drawn_from(ours.conv1d.bias, symmetric(1 / math.sqrt(WIDTH)), "conv1d.bias")


def test_in_proj_differs_uniform_here_normal_in_transformers(both):
    ours, theirs = both
    assert_drawn_from(theirs.in_proj.weight, normal(0, 0.1), "transformers' in_proj.weight")
    assert_drawn_from(ours.in_proj.weight, symmetric(1 / math.sqrt(D_MODEL)), "in_proj.weight")
