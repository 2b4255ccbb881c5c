"""The projection rule: how the zoo's projections and short convolutions draw their weights
(layerzoo/blocks/projections.py), chosen per model by `model.projection_init`."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import layerzoo
from layerzoo import SpecError
from layerzoo.blocks.projections import Linear, ProjectionInit, current_projection_init, projection_init
from layerzoo.blocks.short_conv import ShortConvolution
from layerzoo.mixers import MLSTM, GatedDeltaNet

from tests.helpers.ks import assert_drawn_from, normal, uniform

WIDE = 256  # enough draws for a KS verdict on one tensor


def drawn_tensors(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every weight and bias the rule draws: those of the zoo's Linear and ShortConvolution modules."""
    return {f"{name}.{kind}": getattr(module, kind) for name, module in model.named_modules()
            if isinstance(module, (Linear, ShortConvolution)) for kind in ("weight", "bias")
            if getattr(module, kind) is not None}


def test_the_default_rule_is_pytorchs_fan_in_uniform():
    assert current_projection_init() == ProjectionInit("uniform")
    linear, conv = Linear(WIDE, WIDE), ShortConvolution(WIDE, width=4, bias=True)
    assert_drawn_from(linear.weight, uniform(-WIDE ** -0.5, WIDE ** -0.5), "Linear.weight")
    assert_drawn_from(linear.bias, uniform(-WIDE ** -0.5, WIDE ** -0.5), "Linear.bias")
    assert_drawn_from(conv.weight, uniform(-0.5, 0.5), "ShortConvolution.weight")
    assert_drawn_from(conv.bias, uniform(-0.5, 0.5), "ShortConvolution.bias")


@pytest.mark.parametrize("std", [0.02, 0.1])
def test_the_normal_rule_draws_n_0_std_and_zero_biases(std):
    with projection_init("normal", std) as rule:
        linear, conv = Linear(WIDE, WIDE), ShortConvolution(WIDE, width=4, bias=True)
    assert rule == ProjectionInit("normal", std)
    for what, tensor in {"Linear.weight": linear.weight, "ShortConvolution.weight": conv.weight}.items():
        assert_drawn_from(tensor, normal(0, std), what)
    assert not linear.bias.any() and not conv.bias.any()


def test_a_module_keeps_the_rule_it_was_built_under():
    """reset_parameters() later (a meta build, a missing checkpoint tensor) draws by the module's
    rule, not by the one in force then."""
    with projection_init("normal", 0.02):
        linear = Linear(WIDE, WIDE)
    assert current_projection_init().rule == "uniform"
    linear.reset_parameters()
    assert_drawn_from(linear.weight, normal(0, 0.02), "Linear.weight after a reset")


def test_the_rule_is_restored_after_an_error_inside_the_block():
    with pytest.raises(RuntimeError), projection_init("normal"):
        raise RuntimeError
    assert current_projection_init() == ProjectionInit("uniform")


@pytest.mark.parametrize("rule, std, message", [("xavier", 0.02, "must be one of"), ("normal", 0.0, "must be > 0")])
def test_a_bad_rule_is_one_line(rule, std, message):
    with pytest.raises(ValueError, match=message) as error:
        ProjectionInit(rule, std)
    assert "\n" not in str(error.value)


def test_a_models_rule_reaches_every_block_and_leaves_the_mixers_own_tensors_theirs():
    spec = {"d_model": 64, "n_layers": 2, "vocab_size": 64, "layers": ["gated_deltanet", "mlstm"],
            "mixers": {"gated_deltanet": {"n_heads": 2}, "mlstm": {"n_heads": 2}},
            "projection_init": "normal", "init_std": 0.05}
    torch.manual_seed(0)
    model = layerzoo.build({"model": spec})
    drawn = drawn_tensors(model)
    assert {name.split(".")[2] for name in drawn} >= {"mixer", "ffn"}
    mlstm = model.blocks[1].mixer
    for name, tensor in drawn.items():
        if name.startswith("blocks.1.mixer.gate_proj"):
            continue  # the mLSTM's gates are its own (below)
        if name.endswith("bias"):
            assert not tensor.any(), name
        else:
            assert abs(tensor.std().item() - 0.05) < 0.25 * 0.05, name
    assert not mlstm.gate_proj.weight.any()
    assert torch.equal(mlstm.gate_proj.bias[:2], torch.full((2,), -10.0))
    softplus_dt = nn.functional.softplus(model.blocks[0].mixer.dt_bias)
    assert softplus_dt.min() >= 1e-3 * (1 - 1e-6) and softplus_dt.max() <= 0.1 * (1 + 1e-6)  # Mamba's dt, untouched


def test_uniform_is_the_models_default_and_round_trips_through_the_config():
    model = layerzoo.build("gdn-hybrid-tiny")
    assert model.config.projection_init == "uniform"
    weight = model.blocks[0].mixer.q_proj.weight
    assert_drawn_from(weight, uniform(-64 ** -0.5, 64 ** -0.5), "q_proj.weight")
    config = layerzoo.load_spec({"model": {**model.config.to_dict(), "projection_init": "normal"}}).model
    assert config.projection_init == "normal"
    assert layerzoo.load_spec({"model": config.to_dict()}).model == config


def test_an_unknown_rule_in_a_spec_is_a_spec_error():
    with pytest.raises(SpecError, match="projection_init") as error:
        layerzoo.load_spec("swax-tiny", ["model.projection_init=xavier"])
    assert "\n" not in str(error.value)


def test_standalone_mixers_take_the_rule_in_force():
    with projection_init("normal", 0.02):
        mixer = GatedDeltaNet(64, n_heads=2)
    assert all(module.init.rule == "normal" for module in mixer.modules() if isinstance(module, (Linear, ShortConvolution)))
    assert MLSTM(64, n_heads=2).out_proj.init.rule == "uniform"
