"""transformers' init pass initialises a layerzoo model as its construction does: a fresh model is
layerzoo's own, weights missing from a folder load initialised (and listed), weights a folder
holds are kept, and a NaN in a folder is a one-line error."""

import logging

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from safetensors.torch import load_file, save_file

import layerzoo
from layerzoo.hf import HFError, LayerzooForCausalLM

from tests.helpers.distributions import kolmogorov_smirnov, ks_critical_value
from tests.helpers.hf_inputs import TINY


@pytest.fixture(autouse=True)
def quiet_load_reports():
    """transformers logs a report of every missing key; these tests miss keys on purpose."""
    logger = logging.getLogger("transformers")
    level, logger.level = logger.level, logging.ERROR
    yield
    logger.setLevel(level)


def saved(model: LayerzooForCausalLM, folder, drop=lambda key: False) -> dict[str, torch.Tensor]:
    """Save `model` to `folder` without the weights `drop` names; the weights kept."""
    model.save_pretrained(folder)
    weights = {key: value for key, value in load_file(folder / "model.safetensors").items() if not drop(key)}
    save_file(weights, folder / "model.safetensors", metadata={"format": "pt"})
    return weights


@pytest.mark.parametrize("name", TINY)
def test_a_fresh_model_holds_the_weights_layerzoo_build_draws(name):
    torch.manual_seed(0)
    hf = LayerzooForCausalLM.from_spec(name)
    torch.manual_seed(0)
    direct = layerzoo.build(name)
    assert hf.model.state_dict().keys() == direct.state_dict().keys()
    for key, value in direct.state_dict().items():
        assert torch.equal(hf.model.state_dict()[key], value), key
    assert (hf.model.head.weight is hf.model.embedding.weight) == hf.config.tie_word_embeddings


@settings(max_examples=4, deadline=None)
@given(data=st.data())
@pytest.mark.parametrize("name", TINY)
def test_weights_missing_from_a_folder_load_initialised_and_listed(name, tmp_path_factory, data):
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec(name)
    keys = sorted(load_file_keys(model, tmp_path_factory.mktemp("all")))
    missing = set(data.draw(st.lists(st.sampled_from(keys), min_size=1, max_size=len(keys), unique=True)))
    folder = tmp_path_factory.mktemp("missing")
    kept = saved(model, folder, drop=missing.__contains__)
    loaded, info = LayerzooForCausalLM.from_pretrained(folder, output_loading_info=True)
    state = loaded.state_dict()
    assert missing <= set(info["missing_keys"])  # a tied head is listed beside its embedding
    for key, value in kept.items():
        assert torch.equal(state[key], value), f"{key} was loaded, then changed"
    for key in missing:
        assert not state[key].is_meta and bool(torch.isfinite(state[key]).all()), key
    assert (loaded.model.head.weight is loaded.model.embedding.weight) == loaded.config.tie_word_embeddings


def load_file_keys(model: LayerzooForCausalLM, folder) -> list[str]:
    model.save_pretrained(folder)
    return list(load_file(folder / "model.safetensors"))


def one_mixer_spec(name: str) -> dict:
    options = dict(layerzoo.get_mixer(name).test_options)
    return {"model": {"d_model": 64, "n_layers": 1, "vocab_size": 32, "mixers": {name: options}, "pattern": [name]}}


# What a folder lacks: every weight of the mixer, or only its submodules' (its own tensors loaded:
# its init, which also sets its submodules', must run all the same).
DROPPED = {"all": lambda key: ".mixer." in key, "submodules": lambda key: "." in key.split(".mixer.")[-1]}


@pytest.mark.parametrize("dropped", DROPPED)
@pytest.mark.parametrize("mixer", layerzoo.list_mixers())
def test_a_mixer_missing_from_a_folder_is_initialised_as_a_new_one(mixer, dropped, tmp_path):
    """Mixer weights dropped from a folder: what loading draws is distributed as what
    construction draws (two-sample Kolmogorov-Smirnov at alpha = 1e-3 against a pool of fresh
    models), and the weights construction sets to constants (zeros, gate biases) are those."""
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec(one_mixer_spec(mixer))
    saved(model, tmp_path, drop=lambda key: ".mixer." in key and DROPPED[dropped](key))
    loaded = LayerzooForCausalLM.from_pretrained(tmp_path)
    fresh = []
    for seed in range(1, 6):
        torch.manual_seed(seed)
        fresh.append(LayerzooForCausalLM.from_spec(one_mixer_spec(mixer)).state_dict())
    for key, value in loaded.state_dict().items():
        if ".mixer." not in key or not DROPPED[dropped](key):
            continue
        pool = torch.stack([state[key] for state in fresh])
        if all(torch.equal(pool[0], drawn) for drawn in pool[1:]):  # not random: a constant or a schedule
            assert torch.equal(value, pool[0]), key
            continue
        statistic = kolmogorov_smirnov(value, pool)
        n, m = value.numel(), pool.numel()
        assert statistic < ks_critical_value(n, m), f"{key}: KS statistic {statistic:.3f} over {n} values"


def test_a_nan_weight_is_a_one_line_error_naming_it(tmp_path):
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec("swax-tiny")
    with torch.no_grad():
        model.model.blocks[1].mixer.gate_proj.bias[0] = float("inf")
    model.save_pretrained(tmp_path)
    with pytest.raises(HFError, match=r"model\.blocks\.1\.mixer\.gate_proj\.bias holds NaN or infinite values; "
                                      r"pass allow_non_finite=True") as error:
        LayerzooForCausalLM.from_pretrained(tmp_path)
    assert "\n" not in str(error.value)
    loaded = LayerzooForCausalLM.from_pretrained(tmp_path, allow_non_finite=True)
    assert torch.isinf(loaded.model.blocks[1].mixer.gate_proj.bias[0])


def test_finite_weights_whose_sum_overflows_load(tmp_path):
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec("swax-tiny")
    with torch.no_grad():
        model.model.blocks[1].mixer.gate_proj.bias[:2] = 3e38  # finite, but their fp32 sum is infinite
    model.save_pretrained(tmp_path)
    loaded = LayerzooForCausalLM.from_pretrained(tmp_path)
    assert torch.equal(loaded.model.blocks[1].mixer.gate_proj.bias, model.model.blocks[1].mixer.gate_proj.bias)


@pytest.mark.parametrize("name", TINY)
def test_a_whole_folder_loads_without_resetting_a_loaded_module(name, tmp_path, monkeypatch):
    """Every weight comes from the file: no module whose tensors it holds is reset (drawn, then
    overwritten) once allocated; only modules of buffers no file holds (RoPE's frequencies) are."""
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec(name)
    model.save_pretrained(tmp_path)
    reset = []

    def spy(original):
        def reset_parameters(module):
            if not all(t.is_meta for t in (*module.parameters(), *module.buffers())):
                reset.append(type(module).__name__)
            return original(module)
        return reset_parameters

    for kind in {type(module) for module in model.modules() if hasattr(module, "reset_parameters")}:
        monkeypatch.setattr(kind, "reset_parameters", spy(kind.reset_parameters))
    LayerzooForCausalLM.from_pretrained(tmp_path)
    assert set(reset) <= {"Rotary"}


def test_from_pretrained_takes_a_state_dict_and_a_config_without_a_folder():
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec("swax-tiny")
    loaded = LayerzooForCausalLM.from_pretrained(None, config=model.config, state_dict=model.state_dict())
    for key, value in model.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    with pytest.raises(HFError, match=r"from_pretrained\(None, \.\.\.\) needs config="):
        LayerzooForCausalLM.from_pretrained(None, state_dict=model.state_dict())
