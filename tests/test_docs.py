"""The docs say what the code does: the options tables are the declarations', the README's examples run."""

import re
from pathlib import Path

import pytest
import torch

import layerzoo
from layerzoo.cli import main

ROOT = Path(__file__).resolve().parents[1]


def readme_block(heading: str) -> str:
    """The first ```python block after a README heading."""
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S).group(1)


def test_the_mixers_page_is_what_the_declarations_print(capsys):
    assert main(["mixers", "--markdown"]) == 0
    tables = capsys.readouterr().out
    page = (ROOT / "docs" / "mixers.md").read_text()
    assert page.endswith(tables), "docs/mixers.md is stale: run `layerzoo mixers --markdown` (see its first lines)"


def test_the_readmes_own_mixer_example_runs_as_written():
    try:
        namespace = {}
        exec(compile(readme_block("### Your own mixer"), "README.md (Your own mixer)", "exec"), namespace)
        model = namespace["model"]
        assert [layer.type for layer in model.config.layers] == ["ema", "swa"]
        assert layerzoo.get_mixer("ema").options["n_heads"].help == "heads, each with its own decay"
    finally:
        layerzoo.unregister_mixer("ema")


def test_the_readmes_armt_example_runs_as_written(tmp_path, monkeypatch):
    """Around a small random Llama saved where the example points (32 layers, as SmolLM2-360M's,
    so its memory_layers exist): wrap, train-style loss, generate, save the adapter, load it back."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=32, num_attention_heads=2,
                                      tie_word_embeddings=True, max_position_embeddings=512, vocab_size=64)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained("path/to/save_pretrained_dir")
    ids = torch.randint(0, 64, (1, 40))
    namespace = {"input_ids": ids, "prompt": ids[:, :20]}
    exec(compile(readme_block("## ARMT"), "README.md (ARMT)", "exec"), namespace)
    assert torch.isfinite(namespace["loss"]).all() and namespace["out"].shape == (1, 52)
    saved, restored = namespace["armt"], namespace["restored"]
    assert saved.adapter_state_dict().keys() == restored.adapter_state_dict().keys()
    for name, tensor in saved.adapter_state_dict().items():
        assert torch.equal(restored.adapter_state_dict()[name], tensor), name


def test_the_distill_pages_tables_are_what_the_declarations_print():
    from layerzoo.options import declared, markdown_table, option_rows
    from layerzoo.training.distill import config

    page = (ROOT / "docs" / "distill.md").read_text()
    for name in ("DistillConfig", "AlignConfig", "EndToEndConfig", "LoraConfig", "HeldOutConfig"):
        table = markdown_table(option_rows(declared(getattr(config, name)).values()))
        assert table in page, f"docs/distill.md: the table of {name} is stale; paste what its declarations print"
