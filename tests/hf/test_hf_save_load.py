"""save_pretrained / from_pretrained: a folder that alone describes the model, loaded through the
Auto classes in a fresh process without trust_remote_code; bad folders are one-line errors."""

import json
import re
import subprocess
import sys
import textwrap

import pytest
import torch
from safetensors.torch import save_file

from layerzoo.hf import HFError, LayerzooConfig, LayerzooForCausalLM

from tests.helpers.hf_inputs import TINY, prompts

# Run in a new interpreter: only `import layerzoo.hf` may register the model type.
LOAD_AND_COMPARE = textwrap.dedent("""
    import sys
    import torch
    from safetensors.torch import load_file
    import layerzoo.hf
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

    for folder in sys.argv[1:]:
        expected = load_file(folder + "/expected.safetensors")
        model = AutoModelForCausalLM.from_pretrained(folder)
        assert type(model).__name__ == "LayerzooForCausalLM", type(model)
        assert type(AutoModel.from_pretrained(folder)) is type(model)
        assert AutoConfig.from_pretrained(folder).model_spec == model.config.model_spec
        with torch.no_grad():
            torch.testing.assert_close(model(expected["ids"]).logits, expected["logits"], rtol=0, atol=0)
    print("ok", len(sys.argv) - 1)
""")


def test_every_tiny_spec_reloads_in_a_fresh_process_with_the_same_logits(tmp_path):
    folders = []
    for name in TINY:
        torch.manual_seed(0)
        model = LayerzooForCausalLM.from_spec(name).eval()
        ids = torch.stack(prompts([10, 10], model.config.vocab_size))
        folder = tmp_path / name
        model.save_pretrained(folder)
        with torch.no_grad():
            save_file({"ids": ids, "logits": model(ids).logits}, folder / "expected.safetensors")
        folders.append(str(folder))
    assert (tmp_path / TINY[0] / "model.safetensors").is_file()
    result = subprocess.run([sys.executable, "-c", LOAD_AND_COMPARE, *folders], capture_output=True, text=True)
    assert result.returncode == 0 and f"ok {len(TINY)}" in result.stdout, result.stderr[-3000:]


def test_importing_layerzoo_leaves_transformers_unimported():
    check = "import sys, layerzoo; assert 'transformers' not in sys.modules, 'imported'"
    result = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_the_config_keeps_per_layer_overrides_and_the_tied_head(tmp_path):
    model = LayerzooForCausalLM.from_spec("swa-full-tiny", ["model.overrides={0: {window: 4}, -1: {ffn: false}}"])
    model.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_spec"]["overrides"] == {"0": {"window": 4}, "3": {"ffn": False}}
    loaded = LayerzooForCausalLM.from_pretrained(tmp_path)
    assert loaded.config.model_config() == model.config.model_config()
    assert loaded.model.head.weight is loaded.model.embedding.weight
    assert loaded.model.blocks[0].mixer.window == 4 and loaded.model.blocks[3].ffn is None


def test_bad_folders_and_specs_are_one_line_errors(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "gpt2").mkdir()
    (tmp_path / "gpt2" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "config.json").write_text("{not json")
    cases = [(tmp_path / "missing", "no such folder"), (tmp_path / "empty", "no config.json"),
             (tmp_path / "gpt2", "model_type is 'gpt2', not 'layerzoo'"), (tmp_path / "broken", "not a JSON object")]
    for folder, words in cases:
        with pytest.raises(HFError) as error:
            LayerzooForCausalLM.from_pretrained(folder)
        assert words in str(error.value) and "\n" not in str(error.value)
    with pytest.raises(HFError, match=r"ARMT models are not exported to transformers: [^\n]*$"):
        LayerzooForCausalLM.from_spec("armt-tiny")
    with pytest.raises(ValueError, match="no model_spec"):
        LayerzooConfig().model_config()


def test_weights_that_do_not_fit_the_config_are_one_line_naming_the_tensor_and_both_shapes(tmp_path):
    """transformers ends such a folder in a RuntimeError after a multi-line report; layerzoo reads the
    safetensors header first (nothing allocated) and names the first tensor that does not fit."""
    LayerzooForCausalLM.from_spec("swa-tiny").save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["model_spec"]["d_model"] = 32
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(HFError) as error:
        LayerzooForCausalLM.from_pretrained(tmp_path)
    message = str(error.value)
    assert "\n" not in message and message.startswith(f"{tmp_path / 'model.safetensors'}: ")
    assert re.search(r": model\.[\w.]+ has shape \([\d, ]*64[\d, ]*\), but the model of config.json needs \([\d, ]*32[\d, ]*\): ", message)
    assert "ignore_mismatched_sizes=True" in message
    loaded, info = LayerzooForCausalLM.from_pretrained(tmp_path, ignore_mismatched_sizes=True, output_loading_info=True)
    assert loaded.model.embedding.weight.shape == (256, 32) and info["mismatched_keys"]
