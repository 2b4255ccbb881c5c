"""The docs say what the code does: the options tables are the declarations', the README's examples run."""

import re
import shlex
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


def doc_blocks(page: str, language: str) -> list[str]:
    """The ```language blocks of docs/page, in order."""
    return re.findall(rf"```{language}\n(.*?)```", (ROOT / "docs" / page).read_text(), re.S)


def layerzoo_commands(blocks: list[str]) -> list[list[str]]:
    """The arguments of each `layerzoo ...` line of the blocks (comments dropped)."""
    return [shlex.split(line, comments=True)[1:] for block in blocks for line in block.splitlines()
            if line.startswith("layerzoo ")]


@pytest.fixture
def doc_world(tmp_path):
    """What the convert and distill pages point at, in tmp_path: tiny random teachers at
    path/to/SmolLM2-135M (a Llama) and path/to/Qwen3-0.6B (a Qwen3), each with a tokenizer trained
    on corpus/*.txt, and distill.yaml: docs/distill.md's Options file, each stage cut to two steps
    of two 32-token windows and the held-out measures to four windows."""
    pytest.importorskip("transformers")
    pytest.importorskip("peft")  # the Options file's stage 2 is LoRA
    import yaml

    from tests.helpers.conversion import write_text, write_tokenizer
    from tests.helpers.hf_teachers import TeacherCase, save_teacher

    corpus = write_text(tmp_path / "corpus", words=400)  # a held-out document longer than the reliance example's 256
    for folder, case in (("SmolLM2-135M", TeacherCase("llama", n_layers=4)),
                         ("Qwen3-0.6B", TeacherCase("qwen3", n_layers=4, head_dim=16))):
        write_tokenizer(corpus, save_teacher(case, tmp_path / "path" / "to" / folder, tokenizer_size=None))
    options = yaml.safe_load(next(block for block in doc_blocks("distill.md", "yaml") if block.startswith("distill:")))
    for stage in ("align", "end_to_end"):
        options["distill"][stage].update(steps=2, batch_size=2, seq_len=32)
    options["distill"]["eval"] = {"samples": 4, "batch_size": 4}
    (tmp_path / "distill.yaml").write_text(yaml.safe_dump(options))
    return tmp_path


def enter(world: Path, name: str, monkeypatch) -> Path:
    """A fresh working folder in the world, which sees its teachers, corpus and distill.yaml."""
    folder = world / name
    folder.mkdir()
    for entry in ("path", "corpus", "distill.yaml"):
        (folder / entry).symlink_to(world / entry)
    monkeypatch.chdir(folder)
    return folder


def test_the_convert_pages_commands_and_python_run_as_written(doc_world, monkeypatch):
    import json

    here = enter(doc_world, "commands", monkeypatch)
    for arguments in layerzoo_commands(doc_blocks("convert.md", "bash")):
        assert main(arguments) == 0, arguments
    assert json.loads((here / "smollm2-gdn" / "conversion.json").read_text())["converted_layers"] == [0, 1, 2]
    assert json.loads((here / "qwen3-swa" / "config.json").read_text())["sliding_window"] == 512
    assert (here / "runs" / "smollm2-gdn" / "model" / "model.safetensors").is_file()
    enter(doc_world, "python", monkeypatch)
    namespace = {}
    for index, block in enumerate(doc_blocks("convert.md", "python")):
        exec(compile(block, f"docs/convert.md (python block {index + 1})", "exec"), namespace)
    assert namespace["conversion"].converted == (0, 1, 2)


def test_the_distill_pages_commands_and_python_run_as_written(doc_world, monkeypatch, capsys):
    import yaml

    from layerzoo.training.distill.config import distillation_spec

    here = enter(doc_world, "distill", monkeypatch)
    for arguments in layerzoo_commands(doc_blocks("distill.md", "bash")):
        assert main(arguments) == 0, arguments
    assert (here / "runs" / "smollm2-gdn" / "model" / "config.json").is_file()
    spec = yaml.safe_load((here / "runs" / "smollm2-gdn-ce" / "spec.yaml").read_text())
    assert spec["distill"]["end_to_end"]["ce_weight"] == 0.1
    namespace = {}
    for index, block in enumerate(doc_blocks("distill.md", "python")):
        exec(compile(block, f"docs/distill.md (python block {index + 1})", "exec"), namespace)
    assert (here / "runs" / "smollm2-gdn-full" / "model" / "config.json").is_file()
    assert [row["layer"] for row in namespace["measured"]["layers"]] == [0, 1, 2]
    out = capsys.readouterr().out
    assert "gated_deltanet" in out
    page = (ROOT / "docs" / "distill.md").read_text()
    section = page[page.index("## Evaluating beside the teacher"):]
    excerpt = re.search(r"^```\n(perplexity over.*?)^```", section, re.S | re.M).group(1)
    for line in excerpt.splitlines():  # the evaluation table is what `layerzoo eval runs/smollm2-gdn` printed
        assert re.search(printed_line(line), out, re.M), f"docs/distill.md: not printed: {line}"
    assert (here / "runs" / "compare" / "perplexity-windowspec.png").is_file()
    assert (here / "runs" / "teacher" / "perplexity-SmolLM2-135M-windowspec.json").is_file()
    assert (here / "runs" / "smollm2-gdn" / "eval-teacher-windowspec.json").is_file()
    options = next(block for block in doc_blocks("distill.md", "yaml") if block.startswith("distill:"))
    (here / "as-written.yaml").write_text(options)  # the Options file itself, uncut, reads against the student
    assert distillation_spec(namespace["conversion"].student.config, here / "as-written.yaml").sections["distill"]


def printed_line(line: str) -> str:
    """A regex of an output line of the docs: its words as written, each number (or '-') any number
    or '-', each run of spaces any (column widths follow the numbers)."""
    cells = [r"(?:[\d,.]+|-)" if re.fullmatch(r"[\d,.]+|-", cell) else re.escape(cell) for cell in line.split()]
    return r"^\s*" + r"\s+".join(cells) + r"\s*$"


def test_the_readmes_convert_and_distill_commands_are_the_pages():
    text = (ROOT / "README.md").read_text()
    sections = text[text.index("### Converting a pretrained transformer"):text.index("## Training and evaluation")]
    readme = layerzoo_commands(re.findall(r"```bash\n(.*?)```", sections, re.S))
    pages = layerzoo_commands(doc_blocks("convert.md", "bash") + doc_blocks("distill.md", "bash"))
    assert readme and all(command in pages for command in readme), readme
