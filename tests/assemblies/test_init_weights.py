"""A model built on the meta device and initialised afterwards equals a normal build, to the bit."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import layerzoo
from layerzoo.assemblies import init_weights
from layerzoo.registry import get_mixer

BUILT_SPECS = [name for name in layerzoo.shipped_specs() if name.endswith("-tiny")]


def assert_same_tensors(normal: nn.Module, initialised: nn.Module) -> None:
    """Every parameter and buffer, non-persistent ones (RoPE frequencies) too, equal to the bit."""
    for kind in ("named_parameters", "named_buffers"):
        expected, found = dict(getattr(normal, kind)()), dict(getattr(initialised, kind)())
        assert expected.keys() == found.keys()
        for name, tensor in expected.items():
            assert found[name].device.type == "cpu", name
            assert torch.equal(tensor, found[name]), name


def build_both(make):
    """(a normal build, a meta build initialised afterwards) from the same seed; the generator
    must also end in the same state."""
    torch.manual_seed(11)
    normal = make(None)
    after_normal = torch.get_rng_state()
    torch.manual_seed(11)
    initialised = init_weights(make("meta"))
    assert torch.equal(torch.get_rng_state(), after_normal)
    return normal, initialised


@pytest.mark.parametrize("name", BUILT_SPECS)
def test_a_meta_build_initialised_equals_a_normal_build(name):
    normal, initialised = build_both(lambda device: layerzoo.build(name, device=device))
    assert_same_tensors(normal, initialised)
    base = getattr(initialised, "base", initialised)
    assert (base.head.weight is base.embedding.weight) == base.config.tie_embeddings


@pytest.mark.parametrize("name", ["gdn-hybrid-tiny", "kda-hybrid-tiny", "mamba2-hybrid-tiny", "swax-tiny"])
def test_a_meta_build_initialised_equals_a_normal_build_under_the_normal_projection_rule(name):
    overrides = ["model.projection_init=normal"]
    assert_same_tensors(*build_both(lambda device: layerzoo.build(name, overrides, device=device)))


@pytest.mark.parametrize("name", layerzoo.list_mixers())
def test_every_mixer_reinitialises_as_it_was_constructed(name):
    entry = get_mixer(name)

    def make(device):
        with torch.device(device or "cpu"):
            return entry.cls(32, **entry.test_options)

    assert_same_tensors(*build_both(make))


def test_init_weights_reinitialises_after_to_empty():
    torch.manual_seed(3)
    normal = layerzoo.build("swax-tiny")
    emptied = layerzoo.build("swax-tiny").to_empty(device="cpu")
    torch.manual_seed(3)
    assert_same_tensors(normal, init_weights(emptied))


def test_a_module_with_weights_but_no_reset_is_refused():
    class Scale(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))

    with torch.device("meta"):
        model = nn.Sequential(nn.Linear(3, 3), Scale())
    with pytest.raises(TypeError, match=r"^Scale holds parameters or buffers but has no reset_parameters\(\)"):
        init_weights(model)


def test_the_assemblies_name_their_repeated_blocks():
    causal = layerzoo.build("transformer-tiny", device="meta")
    assert causal.repeated_blocks() == list(causal.blocks)
    armt = layerzoo.build("armt-tiny", device="meta")
    assert armt.repeated_blocks() == list(armt.base.blocks)
