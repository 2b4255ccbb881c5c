"""LayerzooConfig reads like transformers' hybrid configs, round-trips through to_dict and
config.json, and an edited config.json that describes no model is a one-line error naming the key."""

import json

import pytest
from transformers import AutoConfig

import layerzoo
import layerzoo.hf  # noqa: F401  (registers the Auto classes)
from layerzoo.hf import HFError, LayerzooConfig, LayerzooForCausalLM

from tests.helpers.hf_inputs import TINY

# What each registered mixer is called in transformers' hybrids' layer_types.
LAYER_TYPES = {"attention": "full_attention", "swa": "sliding_attention", "mlstm": "linear_attention",
               "gated_deltanet": "linear_attention", "kda": "linear_attention", "mamba2": "linear_attention",
               "assoc_memory": "linear_attention"}


@pytest.mark.parametrize("name", TINY)
def test_the_standard_attributes_describe_the_model(name):
    model = layerzoo.load_spec(name).model
    config = LayerzooConfig.from_model_config(model)
    assert (config.vocab_size, config.hidden_size, config.num_hidden_layers) == (model.vocab_size, model.d_model, model.n_layers)
    assert config.tie_word_embeddings == model.tie_embeddings
    assert config.layer_types == [LAYER_TYPES[layer.type] for layer in model.layers]
    attention = [layer for layer in model.layers if layer.type in ("attention", "swa")]
    with_heads = [layer for layer in attention + list(model.layers) if "n_heads" in layer.options]
    assert config.num_attention_heads == with_heads[0].options["n_heads"]
    first = attention[0].options if attention else None  # servers (vLLM) size their key/value cache by these
    assert config.head_dim == (first["head_dim"] or model.d_model // first["n_heads"] if first else 0)
    assert config.num_key_value_heads == (first["n_kv_heads"] or first["n_heads"] if first else 0)
    windows = [layer.options["window"] for layer in model.layers if layer.type == "swa"]
    assert config.sliding_window == (windows[0] if windows else None)


@pytest.mark.parametrize("name", TINY)
def test_to_dict_from_dict_and_config_json_round_trip(name, tmp_path):
    config = LayerzooConfig.from_model_config(layerzoo.load_spec(name).model, eos_token_id=3)
    assert LayerzooConfig.from_dict(config.to_dict()).to_dict() == config.to_dict()
    config.save_pretrained(tmp_path)
    reloaded = AutoConfig.from_pretrained(tmp_path).to_dict()
    assert {**reloaded, "_name_or_path": ""} == {**config.to_dict(), "_name_or_path": ""}


@pytest.mark.parametrize("edit, message", [
    (lambda spec: None, r"^LayerzooConfig has no model_spec \(config.json's model_spec is null\)"),
    (lambda spec: "swa-tiny", r"^model_spec must be a mapping \(a resolved model: section\), got 'swa-tiny'$"),
    (lambda spec: {**spec, "overrides": {"abc": {"window": 3}}}, r"^model_spec.overrides: 'abc' is not a layer index$"),
    (lambda spec: {**spec, "d_model": -3}, r"^model_spec: model.d_model: must be between 1 and \d+, got -3$"),
    (lambda spec: {**spec, "mixers": {"swa": {"windw": 3}}}, r"^model_spec: model.mixers.swa.windw: unknown option"),
])
def test_an_edited_config_json_that_describes_no_model_is_one_line(edit, message, tmp_path):
    LayerzooForCausalLM.from_spec("swa-tiny").save_pretrained(tmp_path)
    data = json.loads((tmp_path / "config.json").read_text())
    data["model_spec"] = edit(data["model_spec"])
    (tmp_path / "config.json").write_text(json.dumps(data))
    with pytest.raises(HFError, match=message) as error:
        LayerzooForCausalLM.from_pretrained(tmp_path)
    assert "\n" not in str(error.value)
