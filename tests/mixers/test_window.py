"""The window has one source of truth, each SWA layer's `window` option: set_window puts it there
and the configs above the layers say it too (a CausalLM's, an ARMT's through its base); at_window
restores every one of them; the value is checked once, where it enters, with one error type."""

from __future__ import annotations

import pytest
import torch

import layerzoo
from layerzoo.errors import OptionError
from layerzoo.mixers import SlidingWindowAttention, at_window, set_window
from layerzoo.mixers.attention import sliding_window_layers

from tests.helpers.windows import HYBRID


def windows(config) -> list:
    return [layer.options.get("window") for layer in config.layers]


def test_set_window_changes_the_layers_options_and_the_models_config():
    model = layerzoo.build(HYBRID)
    assert set_window(model, 4) == 3
    assert [layer.options.window for layer in sliding_window_layers(model)] == [4, 4, 4]
    assert windows(model.config) == [4, None, 4, 4]
    section = model.config.to_dict()
    assert section["mixers"]["swa"]["window"] == section["mixers"]["wide"]["window"] == 4
    assert "overrides" not in section  # every layer of each config runs at 4 now
    assert layerzoo.build({"model": section}).config == model.config


def test_at_window_restores_the_options_and_the_config_it_found():
    model = layerzoo.build(HYBRID)
    built, options = model.config, [layer.options for layer in sliding_window_layers(model)]
    with at_window(model, 5):
        assert windows(model.config) == [5, None, 5, 5]
    assert model.config is built
    assert all(layer.options is saved for layer, saved in zip(sliding_window_layers(model), options))
    set_window(model, 3)
    with at_window(model, 6):
        pass
    assert windows(model.config) == [3, None, 3, 3]
    set_window(model, 8)
    with at_window(model, None):
        assert windows(model.config) == [8, None, 8, 8]


def test_a_model_set_back_to_its_windows_has_the_config_it_was_built_with():
    model = layerzoo.build(HYBRID)
    built = model.config
    set_window(model, 4)
    for layer, window in zip(sliding_window_layers(model), (8, 16, 32)):
        set_window(layer, window)  # one layer at a time: the module itself counts
    model.refresh_config()
    assert model.config is built


def test_the_running_model_is_the_one_its_config_builds():
    model = layerzoo.build("swa-tiny").eval()
    set_window(model, 4)
    rebuilt = layerzoo.CausalLM(model.config).eval()
    rebuilt.load_state_dict(model.state_dict())
    ids = torch.randint(0, 256, (1, 24))
    with torch.no_grad():
        assert torch.equal(rebuilt(ids), model(ids))


def test_an_armt_says_its_bases_window():
    spec = layerzoo.load_spec("armt-tiny", ["model.pattern=[swa]", "model.mixers.swa.window=8"])
    model = layerzoo.build(spec)
    set_window(model, 3)
    assert windows(model.config) == [3] * model.config.n_layers and model.config is model.base.config


@pytest.mark.parametrize("window", [0, -1, 2.5, "8", True, None])
def test_a_bad_window_is_one_option_error_before_anything_changes(window):
    model = layerzoo.build(HYBRID)
    built = model.config
    with pytest.raises(OptionError, match=r"^window: "):
        set_window(model, window)
    assert model.config is built


def test_the_window_is_set_only_by_set_window():
    mixer = SlidingWindowAttention(32, n_heads=2, window=8)
    with pytest.raises(AttributeError, match=r"set by layerzoo\.set_window\(model, 4\), which also updates the "
                                             r"model's options and config"):
        mixer.window = 4
    set_window(mixer, 4)
    assert mixer.window == mixer.options.window == 4
