"""`layerzoo.set_window(model, w)` then `save_pretrained`: the saved config says w, and the folder
loads running at w; for a CausalLM inside a LayerzooForCausalLM, for a hybrid whose SWA layers
had per-layer windows, and for a CausalLM exported directly (a distilled student's path)."""

from __future__ import annotations

import json

import pytest
import torch

pytest.importorskip("transformers")

from transformers import AutoModelForCausalLM

import layerzoo
from layerzoo.hf import LayerzooForCausalLM
from layerzoo.hf.export import export_model
from layerzoo.mixers import at_window
from layerzoo.mixers.attention import sliding_window_layers

from tests.helpers.windows import HYBRID


def saved_windows(folder) -> tuple[int | None, dict, dict]:
    """config.json's sliding_window, each named config's window and the overrides."""
    config = json.loads((folder / "config.json").read_text())
    section = config["model_spec"]
    named = {name: body.get("window") for name, body in section["mixers"].items() if "window" in body}
    return config["sliding_window"], named, section.get("overrides", {})


@pytest.mark.parametrize("spec", ["swax-tiny", HYBRID])
def test_the_saved_config_says_the_window_set(spec, tmp_path):
    model = LayerzooForCausalLM.from_spec(spec).eval()
    assert layerzoo.set_window(model, 5) > 0
    model.save_pretrained(tmp_path)
    sliding_window, named, overrides = saved_windows(tmp_path)
    assert sliding_window == 5 and set(named.values()) == {5} and not overrides
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert [layer.window for layer in sliding_window_layers(loaded)] == [5] * len(sliding_window_layers(model))
    ids = torch.randint(0, model.config.vocab_size, (1, 12))
    with torch.no_grad():
        assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_at_window_leaves_the_config_as_it_was(tmp_path):
    model = LayerzooForCausalLM.from_spec(HYBRID)
    before = model.config.to_json_string()
    with at_window(model, 3):
        assert model.config.sliding_window == 3
    assert model.config.to_json_string() == before
    model.save_pretrained(tmp_path)
    assert saved_windows(tmp_path) == (8, {"swa": 8, "wide": 32}, {"2": {"window": 16}})


def test_an_exported_causal_lm_says_the_window_set(tmp_path):
    model = layerzoo.build(HYBRID)
    layerzoo.set_window(model, 6)
    export_model(model, tmp_path, tmp_path / "model")
    assert saved_windows(tmp_path / "model") == (6, {"swa": 6, "wide": 6}, {})
