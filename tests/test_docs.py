"""The docs say what the code does: the options tables are the declarations', and every code
block of the README and the pages runs in a test here, or says why it cannot."""

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import layerzoo
from layerzoo.cli import main

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
RUNNABLE = ("python", "bash", "yaml")  # the languages whose blocks are code; the others are data or output
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")


def fenced_blocks(path: Path) -> list[tuple[str, str, str, str | None]]:
    """(heading, language, code, the reason it is not run or None) of each fenced block of a
    Markdown file, in order; the heading is the nearest line starting with # above it, outside code."""
    found, heading, language, code, reason, previous = [], "", None, [], None, ""
    for line in path.read_text().splitlines():
        if language is None and line.startswith("```"):
            language, code = line[3:].strip(), []
            marked = NOT_RUN.fullmatch(previous.strip())
            reason = marked.group(1) if marked else None
        elif language is not None and line.startswith("```"):
            found.append((heading, language, "\n".join(code) + "\n", reason))
            language = None
        elif language is not None:
            code.append(line)
        elif line.startswith("#"):
            heading = line
        previous = line
    return found


def blocks(path: Path, heading: str, language: str = "python") -> list[str]:
    """The blocks of one language under a heading (up to the next heading)."""
    found = [code for under, lang, code, _ in fenced_blocks(path) if under == heading and lang == language]
    assert found, f"{path.name}: no {language} block under {heading!r}"
    return found


def page(name: str) -> Path:
    return DOCS / name


def run_blocks(path: Path, heading: str, namespace: dict | None = None) -> dict:
    """Execute the python blocks under a heading, in order, in one namespace; returns it."""
    namespace = {} if namespace is None else namespace
    for index, code in enumerate(blocks(path, heading)):
        exec(compile(code, f"{path.name} ({heading}, block {index + 1})", "exec"), namespace)
    return namespace


# (file, heading, language) of every block the tests below run; every other block of a runnable
# language is marked `<!-- not run: reason -->` on the line before it.
RUN = {
    ("README.md", "## A spec", "yaml"), ("README.md", "## A spec", "python"),
    ("README.md", "## A mixer in your own model", "python"), ("README.md", "## Your own mixer", "python"),
    ("README.md", "## A Hugging Face round trip", "python"), ("README.md", "## ARMT around a pretrained model", "python"),
    ("README.md", "## Converting and distilling a pretrained transformer", "bash"),
    ("docs/contract.md", "# The mixer contract and its state", "python"),
    ("docs/contract.md", "## Sequences of different lengths", "python"),
    ("docs/contract.md", "## One mixer in your own model", "python"),
    ("docs/own-mixer.md", "# Your own mixer", "python"), ("docs/own-mixer.md", "## What check_mixer checks", "python"),
    ("docs/own-mixer.md", "## A target of `layerzoo convert`", "python"),
    ("docs/specs.md", "# Specs", "yaml"), ("docs/specs.md", "## Looking at a spec", "bash"),
    ("docs/specs.md", "## Building and running a model", "python"),
    ("docs/armt.md", "## From a spec", "python"), ("docs/armt.md", "## Around a pretrained model", "python"),
    ("docs/armt.md", "## Around a pretrained model", "yaml"),
    ("docs/hf.md", "## Saving, loading, generating", "python"), ("docs/hf.md", "## A local task", "yaml"),
    ("docs/hf.md", "## A local task", "bash"),
    ("docs/kernels.md", "# Kernels and backends", "python"), ("docs/kernels.md", "## The recurrent kernels", "python"),
    ("docs/packed.md", "# Packed sequences (cu_seqlens)", "python"),
    ("docs/text.md", "## The text task", "yaml"), ("docs/training.md", "## The `training:` section", "yaml"),
    ("docs/convert.md", "# Converting a pretrained transformer into a hybrid", "bash"),
    ("docs/convert.md", "# Converting a pretrained transformer into a hybrid", "python"),
    ("docs/distill.md", "# Distillation: a converted model from its teacher", "bash"),
    ("docs/distill.md", "# Distillation: a converted model from its teacher", "python"),
    ("docs/distill.md", "## Options", "yaml"), ("docs/distill.md", "## The reliance measure", "python"),
    ("docs/distill.md", "## Evaluating beside the teacher", "bash"),
}


def markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("mixers/*.md"))]


def test_every_code_block_runs_in_a_test_or_says_why_not():
    unaccounted = []
    present = set()
    for path in markdown_files():
        name = str(path.relative_to(ROOT))
        for heading, language, _, reason in fenced_blocks(path):
            if language not in RUNNABLE:
                continue
            present.add((name, heading, language))
            if (name, heading, language) in RUN:
                assert reason is None, f"{name}: a block under {heading!r} is run by a test but marked not run"
            elif not reason:
                unaccounted.append(f"{name}: a {language} block under {heading!r}")
    assert not unaccounted, "run these in tests/test_docs.py, or mark them <!-- not run: why -->:\n" + "\n".join(unaccounted)
    assert RUN <= present, f"RUN names blocks that are not there: {sorted(RUN - present)}"


def test_the_mixers_page_is_what_the_declarations_print(capsys):
    assert main(["mixers", "--markdown"]) == 0
    tables = capsys.readouterr().out
    page = (ROOT / "docs" / "mixers.md").read_text()
    assert page.endswith(tables), "docs/mixers.md is stale: run `layerzoo mixers --markdown` (see its first lines)"


def test_the_own_mixer_pages_example_runs_as_written():
    from layerzoo.testing.families import SSD

    try:
        namespace = run_blocks(page("own-mixer.md"), "# Your own mixer")
        model = namespace["model"]
        assert [layer.type for layer in model.config.layers] == ["ema", "swa"]
        assert layerzoo.get_mixer("ema").options["n_heads"].help == "heads, each with its own decay"
        suites = run_blocks(page("own-mixer.md"), "## What check_mixer checks", {"MY_KERNEL_FAMILY": SSD})
        assert callable(suites["test_ema"]) and callable(suites["test_my_kernel"])
    finally:
        layerzoo.unregister_mixer("ema")


def test_the_readmes_own_mixer_runs_as_written(capsys):
    try:
        model = run_blocks(README, "## Your own mixer")["model"]
        assert [layer.type for layer in model.config.layers] == ["ema", "swa"]
        assert "ema" in capsys.readouterr().out  # check_mixer's report
    finally:
        layerzoo.unregister_mixer("ema")


def test_the_contract_pages_examples_run_as_written():
    contract = page("contract.md")
    namespace = run_blocks(contract, "# The mixer contract and its state")
    assert namespace["y"].shape == (2, 48, 64) and namespace["mixer"].state_size(48) > 0
    run_blocks(contract, "## Sequences of different lengths", namespace)
    assert namespace["y"].shape == (1, 60, 64)
    block = run_blocks(contract, "## One mixer in your own model")
    assert block["y_next"].shape == (2, 1, 256) and block["block"].attn.window == 2048


def test_the_readmes_spec_and_own_model_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my-hybrid.yaml").write_text(blocks(README, "## A spec", "yaml")[0])
    model = run_blocks(README, "## A spec")["model"]
    assert [layer.type for layer in model.config.layers] == ["swa", "gated_deltanet", "swa", "attention"]
    assert main(["describe", "my-hybrid.yaml"]) == 0
    assert run_blocks(README, "## A mixer in your own model")["y_next"].shape == (2, 1, 256)


def test_the_specs_pages_spec_commands_python_and_error_are_as_written(tmp_path, monkeypatch, capsys):
    specs = page("specs.md")
    monkeypatch.chdir(tmp_path)
    spec = blocks(specs, "# Specs", "yaml")[0]
    (tmp_path / "my-hybrid.yaml").write_text(spec)
    for arguments in layerzoo_commands(blocks(specs, "## Looking at a spec", "bash")):
        assert main(arguments) == 0, arguments
    namespace = run_blocks(specs, "## Building and running a model")
    assert namespace["out"].shape == (1, 72) and namespace["model"].config.n_layers == 4
    (tmp_path / "my-hybrid.yaml").write_text(spec.replace("window: 128}", "windw: 128}", 1))
    capsys.readouterr()
    assert main(["describe", "my-hybrid.yaml"]) == 2
    error = capsys.readouterr().err.strip()
    written = [code for heading, language, code, _ in fenced_blocks(specs) if heading == "## Errors" and not language]
    assert error == f"layerzoo: error: {written[0].strip()}"


@pytest.fixture
def llama_folder(tmp_path, monkeypatch):
    """A small random Llama saved where the ARMT examples point (32 layers, as SmolLM2-360M's, so
    their memory_layers exist), in tmp_path as the working folder."""
    transformers = pytest.importorskip("transformers")
    monkeypatch.chdir(tmp_path)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=16, intermediate_size=32, num_hidden_layers=32, num_attention_heads=2,
                                      tie_word_embeddings=True, max_position_embeddings=512, vocab_size=64)
    transformers.AutoModelForCausalLM.from_config(config).save_pretrained("path/to/save_pretrained_dir")
    return tmp_path / "path" / "to" / "save_pretrained_dir"


@pytest.mark.parametrize("path, heading", [(README, "## ARMT around a pretrained model"),
                                           (DOCS / "armt.md", "## Around a pretrained model")])
def test_the_armt_examples_around_a_pretrained_model_run_as_written(llama_folder, path, heading):
    """wrap, train-style loss, (the page: generate), save the adapter, load it back."""
    ids = torch.randint(0, 64, (1, 40))
    namespace = run_blocks(path, heading, {"input_ids": ids, "prompt": ids[:, :20]})
    assert torch.isfinite(namespace["loss"]).all()
    if "out" in namespace:
        assert namespace["out"].shape == (1, 52)
    saved, restored = namespace["armt"], namespace["restored"]
    assert saved.adapter_state_dict().keys() == restored.adapter_state_dict().keys()
    for name, tensor in saved.adapter_state_dict().items():
        assert torch.equal(restored.adapter_state_dict()[name], tensor), name


def test_the_armt_pages_specs_build(llama_folder):
    armt = page("armt.md")
    namespace = run_blocks(armt, "## From a spec")
    assert torch.isfinite(namespace["loss"]) and namespace["out"].shape == (2, 28)
    Path("armt-hf.yaml").write_text(blocks(armt, "## Around a pretrained model", "yaml")[0])
    model = layerzoo.build("armt-hf.yaml", [f"base.hf_checkpoint={llama_folder}"])
    assert len(model.memory_layers) == 6


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


def test_the_own_mixer_pages_conversion_target_converts_as_written(doc_world, monkeypatch):
    enter(doc_world, "own-target", monkeypatch)
    try:
        namespace = run_blocks(page("own-mixer.md"), "# Your own mixer")
        run_blocks(page("own-mixer.md"), "## A target of `layerzoo convert`", namespace)
        conversion = namespace["conversion"]
        assert conversion.converted == (0, 1, 2)
        assert [type(block.mixer).__name__ for block in conversion.student.blocks] == ["EMAFromAttention"] * 3 + ["Attention"]
    finally:
        layerzoo.unregister_mixer("ema")
        layerzoo.unregister_mixer("ema_from_attention")


def test_the_convert_pages_targets_are_the_registrys():
    pytest.importorskip("transformers")
    from layerzoo.convert import list_targets

    listed = re.search(r"list_targets\(\)`: (.+?), and \[your own", " ".join(page("convert.md").read_text().split())).group(1)
    assert re.findall(r"`(\w+)`", listed) == list_targets()


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
    readme = layerzoo_commands(blocks(README, "## Converting and distilling a pretrained transformer", "bash"))
    pages = layerzoo_commands(doc_blocks("convert.md", "bash") + doc_blocks("distill.md", "bash"))
    assert readme and all(command in pages for command in readme), readme


def test_the_hugging_face_examples_and_the_local_task_run_as_written(tmp_path, monkeypatch):
    """The README's round trip, then the page's: save, load, generate; then lm-eval on the page's
    data and task files, with the page's command, on the folder the page's example saved."""
    pytest.importorskip("transformers")
    from tests.hf.test_hf_export import save_tokenizer

    hf = page("hf.md")
    monkeypatch.chdir(tmp_path)
    assert run_blocks(README, "## A Hugging Face round trip")["ids"].shape == (1, 19)
    namespace = run_blocks(hf, "## Saving, loading, generating")
    assert namespace["out"].loss is not None and namespace["ids"].shape[1] > 16
    pytest.importorskip("lm_eval", reason="lm-evaluation-harness is the eval extra's")
    save_tokenizer(tmp_path / "my-model")  # a word-level tokenizer of the task's words
    (tmp_path / "my-tasks").mkdir()
    data = [code for heading, language, code, _ in fenced_blocks(hf) if heading == "## A local task" and language == "json"]
    assert [json.loads(line)["answer"] for line in data[0].splitlines()] == [0, 0, 0]
    (tmp_path / "my-tasks" / "data.jsonl").write_text(data[0])
    (tmp_path / "my-tasks" / "tiny_choice.yaml").write_text(blocks(hf, "## A local task", "yaml")[0])
    command = blocks(hf, "## A local task", "bash")[0].replace("\\\n", " ")
    arguments = shlex.split(command)
    assert arguments[:2] == ["HF_DATASETS_OFFLINE=1", "layerzoo"], arguments
    offline = {**os.environ, "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "layerzoo", *arguments[2:]], capture_output=True, text=True,
                            env=offline, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert re.search(r"tiny_choice.*\|\s*acc\s*\|", result.stdout), result.stdout


def kernel_inputs(batch: int = 1, length: int = 356, heads: int = 2, key: int = 16, value: int = 16) -> dict:
    """The tensors the kernels' pages call their functions on, at their documented shapes."""
    torch.manual_seed(0)
    q, k = torch.randn(batch, length, heads, key), torch.nn.functional.normalize(torch.randn(batch, length, heads, key), dim=-1)
    gate = torch.nn.functional.logsigmoid(torch.randn(batch, length, heads) + 3)  # a log decay, <= 0
    return {"torch": torch, "q": q, "k": k, "v": torch.randn(batch, length, heads, value),
            "i": torch.randn(batch, length, heads), "f": torch.randn(batch, length, heads) + 3, "g": gate,
            "g_k": torch.nn.functional.logsigmoid(torch.randn(batch, length, heads, key) + 3),
            "beta": torch.rand(batch, length, heads)}


def test_the_kernels_pages_calls_run_as_written():
    kernels = page("kernels.md")
    namespace = run_blocks(kernels, "# Kernels and backends", kernel_inputs())
    assert namespace["out"].shape == (1, 356, 2, 16)
    run_blocks(kernels, "## The recurrent kernels", namespace)
    assert namespace["o"].shape == (1, 356, 2, 16) and namespace["S"].shape == (1, 2, 16, 16)


def test_the_kernels_pages_backends_table_is_the_registries():
    import importlib

    families = {"sliding_window_attention": "sliding_window", "mlstm": "mlstm", "gated_delta_rule": "gated_delta_rule",
                "ssd": "ssd", "kda": "kda", "associative_read": "assoc_memory"}
    text = page("kernels.md").read_text()
    rows = {re.findall(r"`(\w+)`", row.split("|")[2])[0]: row.split("|")[3:5]
            for row in text.splitlines() if row.startswith("| ") and "`" in row.split("|")[2]}
    for function, family in families.items():
        module = importlib.import_module(f"layerzoo.kernels.{family}")
        backends, packed = rows[function]
        assert re.findall(r"`(\w+)`", backends) == list(module.BACKENDS), function
        assert re.findall(r"`(\w+)`", packed) == list(getattr(module, "PACKED", ())), function


def test_the_packed_pages_calls_run_as_written():
    from layerzoo.blocks import ShortConvolution

    namespace = kernel_inputs()
    cu = torch.tensor([0, 100, 101, 356])
    namespace.update(S0=torch.zeros(3, 2, 16, 16), x=torch.randn(1, 356, 24), short_conv=ShortConvolution(24),
                     conv_state=None, cu_q=cu, cu_k=cu)
    from layerzoo.kernels import gated_delta_rule, mlstm, sliding_window_attention

    namespace.update(mlstm=mlstm, gated_delta_rule=gated_delta_rule, sliding_window_attention=sliding_window_attention)
    run_blocks(page("packed.md"), "# Packed sequences (cu_seqlens)", namespace)
    assert namespace["state"].C.shape == (3, 2, 16, 16) and namespace["S"].shape == (3, 2, 16, 16)
    assert namespace["conv_state"].shape == (3, 3, 24) and namespace["out"].shape == (1, 356, 2, 16)


def test_the_training_pages_section_is_swa_niah_tiny(tmp_path):
    written = tmp_path / "written.yaml"
    written.write_text(blocks(page("training.md"), "## The `training:` section", "yaml")[0])
    assert layerzoo.load_spec(written).sections["training"] == layerzoo.load_spec("swa-niah-tiny").sections["training"]


def test_the_text_pages_task_section_reads(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text('{"text": "a document"}\n')
    (tmp_path / "notes" / "deep").mkdir(parents=True)
    (tmp_path / "notes" / "deep" / "b.txt").write_text("another document")
    (tmp_path / "text.yaml").write_text("extends: swax-text-tiny\n" + blocks(page("text.md"), "## The text task", "yaml")[0])
    task = layerzoo.load_spec("text.yaml").sections["training"].task
    assert task.name == "text" and task.options["tokenizer"] == "bpe:1024" and task.options["holdout"] == 0.05
