"""The benchmark runner: every registered benchmark runs end to end at its smoke size, writes its JSON
with the run's context and renders its tables; the docs hold what the committed results render;
A/B runs against a revision compare cell by cell and clean up; benchmarks/ imports nothing from
tests/ and leaves sys.path alone. Nothing here asserts a time.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.runner.against_base import best_per_cell, compare_rows, without_base_options
from benchmarks.runner.cli import main
from benchmarks.runner.registry import NAMES, get
from benchmarks.runner.render import DOCS, README, REGION, TOPIC_PAGES, render_docs, render_results, rendered, stale
from benchmarks.runner.results import read_json, write_json
from benchmarks.runner.run import parse, run_benchmark

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
CONTEXT_FIELDS = {"machine", "python", "versions", "threads", "git", "date"}


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory) -> tuple[Path, dict[str, str | None]]:
    """Every benchmark run once at its smoke size, in this process, into one results folder:
    (the folder, {name: why it could not run here, or None})."""
    folder = tmp_path_factory.mktemp("results")
    threads = torch.get_num_threads()  # --smoke runs on one thread: give the rest of the suite its own back
    skipped = {}
    try:
        for name in NAMES:
            benchmark = get(name)
            skipped[name] = benchmark.unavailable(parse(benchmark, ["--smoke"]))
            if skipped[name] is None:
                assert run_benchmark(benchmark, ["--smoke", "--out", str(folder / f"{name}.json")]) == 0, name
    finally:
        torch.set_num_threads(threads)
        torch._dynamo.reset()  # compiled_training's graphs
    return folder, skipped


def test_every_module_is_a_registered_benchmark_with_a_one_line_description():
    modules = {path.stem for path in BENCHMARKS.glob("*.py") if not path.stem.startswith("__")}
    assert modules == set(NAMES)
    for name in NAMES:
        benchmark = get(name)
        assert benchmark.name == name
        assert benchmark.description and "\n" not in benchmark.description and len(benchmark.description) < 120


def test_smoke_sizes_are_defaults_that_given_options_override():
    swa = get("swa")
    args = parse(swa, ["--smoke", "--reps", "3"])
    assert args.reps == 3 and args.seq_lens == swa.smoke["seq_lens"] and args.threads == 1
    assert parse(swa, []).seq_lens != swa.smoke["seq_lens"]


def test_spec_overrides_given_replace_the_default_ones():
    armt = get("armt")
    assert parse(armt, []).overrides == ["armt.segment_size=128"]
    assert parse(armt, ["--set", "armt.segment_size=64", "--set", "model.d_model=128"]).overrides == [
        "armt.segment_size=64", "model.d_model=128"]


def test_the_gpu_table_says_in_one_line_why_it_cannot_run_without_cuda(monkeypatch, capsys):
    if torch.cuda.is_available():
        pytest.skip("CUDA is here")
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert run_benchmark(get("gpu_kernels"), []) == 1
    message = capsys.readouterr().err.strip()
    assert "\n" not in message and "needs a CUDA device" in message


def test_listing_names_every_benchmark(capsys):
    assert main([]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert listed == list(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_each_benchmark_runs_at_its_smoke_size_and_renders(name, smoke_results):
    folder, skipped = smoke_results
    if skipped[name]:
        pytest.skip(skipped[name])
    data = read_json(folder / f"{name}.json")
    assert data["benchmark"] == name and data["config"]["smoke"] is True
    assert CONTEXT_FIELDS <= set(data["context"])
    context = data["context"]
    assert {"platform", "cpu", "cores"} <= set(context["machine"]) and context["versions"]["torch"] == torch.__version__
    assert context["threads"] == 1 and {"commit", "dirty"} <= set(context["git"])
    assert data["rows"] and all("cell" in row and (len(row) > 1) for row in data["rows"])
    tables = render_results(data)
    assert tables.startswith("_Smoke run") and "\n|" in tables


def test_a_probed_cell_has_its_peak_memory(smoke_results):
    folder, skipped = smoke_results
    if skipped["armt"]:
        pytest.skip(skipped["armt"])
    rows = read_json(folder / "armt.json")["rows"]
    peaks = [row["peak_bytes"] for row in rows if "peak_bytes" in row]
    assert len(peaks) == 2 and all(isinstance(peak, int) for peak in peaks)  # ARMT and base, one process each


def test_the_text_benchmark_times_each_bpe_beside_the_library_called_directly(tmp_path, monkeypatch):
    from benchmarks.text_data import serial

    benchmark = get("text_data")
    if benchmark.unavailable(parse(benchmark, ["--smoke"])):
        pytest.skip(benchmark.unavailable(parse(benchmark, ["--smoke"])))
    threads = torch.get_num_threads()
    try:
        argv = ["--smoke", "--vocab-size", "300", "280", "--out", str(tmp_path / "text_data.json")]
        assert run_benchmark(benchmark, argv) == 0
    finally:
        torch.set_num_threads(threads)
    data = read_json(tmp_path / "text_data.json")
    cells = {(row["cell"]["tokenizer"], row["cell"]["what"]) for row in data["rows"] if "tokenizer" in row["cell"]}
    assert data["tokenizers"] == ["bytes", "BPE 300", "BPE 280"]
    assert cells == {("bytes", "encode"), ("bytes", "build"), ("BPE 300", "library, 1 thread"),
                     *((name, what) for name in ("BPE 300", "BPE 280") for what in ("encode", "library", "build"))}
    assert data["encoder_threads"] >= 1
    table = render_results(data)
    assert ("| tokenizer | encode_batch MB/s | tokenizers directly MB/s | directly, 1 thread MB/s | shard build MB/s |"
            in table)
    assert "| bytes |" in table and "| – | – |" in table  # bytes: no library to call
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    # the one-thread cell's setting, during that cell only
    assert serial(lambda: os.environ["TOKENIZERS_PARALLELISM"])() == "false"
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_the_docs_render_from_the_smoke_results(smoke_results, tmp_path):
    folder, skipped = smoke_results
    readme, docs = tmp_path / "README.md", tmp_path / "benchmarks.md"
    shutil.copy(README, readme)
    shutil.copy(DOCS, docs)
    topic_pages = {name: tmp_path / page.name for name, page in TOPIC_PAGES.items()}
    for name, page in TOPIC_PAGES.items():
        shutil.copy(page, topic_pages[name])
    assert set(stale(folder, readme, docs, topic_pages)) == {readme, docs, *topic_pages.values()}
    texts = render_docs(folder, readme, docs, topic_pages)
    for name in NAMES:
        page = texts[topic_pages.get(name, docs)]
        body = page.split(f"<!-- benchmarks:{name}:start -->")[1].split(f"<!-- benchmarks:{name}:end -->")[0]
        assert ("not measured yet" in body) == bool(skipped[name]), name
        assert skipped[name] or "|---:" in body, name
    assert "| kernel | shape | ours |" in texts[readme]
    for path, text in texts.items():
        path.write_text(text)
    assert stale(folder, readme, docs, topic_pages) == []


def test_the_committed_docs_are_what_the_committed_results_render():
    assert main(["render", "--check"]) == 0, "run `python -m benchmarks render`"


def test_a_hand_edited_table_fails_the_check(tmp_path):
    readme, docs = tmp_path / "README.md", tmp_path / "benchmarks.md"
    shutil.copy(README, readme)
    text = DOCS.read_text()
    docs.write_text(text.replace("<!-- benchmarks:swa:end -->", "| 1 | 2 |\n<!-- benchmarks:swa:end -->"))
    assert stale(readme=readme, docs=docs) == [docs]


region_text = st.text(st.characters(blacklist_characters="<>"), max_size=40)


@given(before=region_text, inside=region_text, after=region_text)
def test_rendering_replaces_only_what_lies_between_the_markers(before, inside, after):
    text = f"{before}\n<!-- benchmarks:swa:start -->\n{inside}\n<!-- benchmarks:swa:end -->\n{after}"
    empty = ROOT / "no-results-here"
    once = rendered(text, empty)
    assert once.startswith(f"{before}\n<!-- benchmarks:swa:start -->\nnot measured yet") and once.endswith(after)
    assert rendered(once, empty) == once and [m["key"] for m in REGION.finditer(once)] == ["swa"]


def test_no_benchmark_module_imports_tests_or_edits_sys_path():
    for path in BENCHMARKS.rglob("*.py"):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                assert node.module.split(".")[0] != "tests", f"{path}: from {node.module} import"
            if isinstance(node, ast.Import):
                assert all(alias.name.split(".")[0] != "tests" for alias in node.names), f"{path}: import tests"
            if isinstance(node, ast.Attribute) and node.attr == "path":
                assert not (isinstance(node.value, ast.Name) and node.value.id == "sys"), f"{path}:{node.lineno}: sys.path"


def test_results_are_written_whole(tmp_path):
    path = tmp_path / "deeper" / "x.json"
    write_json(path, {"rows": [{"cell": {"T": 1}, "seconds": 0.5}]})
    assert read_json(path)["rows"][0]["seconds"] == 0.5
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]  # no temporary file left beside it


cells = st.lists(st.fixed_dictionaries({"method": st.sampled_from("abc"), "seq_len": st.integers(1, 4)}),
                 min_size=1, max_size=6, unique_by=lambda cell: (cell["method"], cell["seq_len"]))
seconds = st.floats(1e-6, 10.0)


@given(cells, st.data())
def test_the_best_of_passes_is_each_cells_least_time(cell_list, data):
    passes = data.draw(st.integers(1, 4))
    runs = [{"rows": [{"cell": cell, "seconds": data.draw(seconds)} for cell in cell_list]} for _ in range(passes)]
    best = best_per_cell(runs)
    assert [row["cell"] for row in best] == cell_list
    for index, row in enumerate(best):
        assert row["seconds"] == min(run["rows"][index]["seconds"] for run in runs)


@given(cells, st.data())
def test_a_comparison_gives_current_over_base_for_cells_on_both_sides(cell_list, data):
    current = [{"cell": cell, "seconds": data.draw(seconds)} for cell in cell_list]
    base = [{"cell": cell, "seconds": data.draw(seconds)} for cell in cell_list[1:]]  # one cell only here
    compared = compare_rows(current, base)
    assert [row["cell"] for row in compared] == cell_list[1:]
    for row, here, there in zip(compared, current[1:], base):
        assert row["seconds"] == here["seconds"] and row["base_seconds"] == there["seconds"]
        assert row["seconds_ratio"] == pytest.approx(here["seconds"] / there["seconds"])


@given(st.permutations([["--seq-lens", "64", "128"], ["--smoke"], ["--base", "HEAD~1"], ["--passes=2"],
                        ["--out", "x.json"], ["--threads", "1"]]))
def test_each_side_of_an_ab_run_gets_the_benchmarks_own_options(groups):
    argv = [token for group in groups for token in group]
    kept = [token for group in groups if group[0].split("=")[0] not in ("--base", "--passes", "--out") for token in group]
    assert without_base_options(argv) == kept


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def has_runner(revision: str) -> bool:
    return subprocess.run(["git", "cat-file", "-e", f"{revision}:benchmarks/__main__.py"], cwd=ROOT,
                          capture_output=True).returncode == 0


needs_git = pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")


@needs_git
def test_a_revision_older_than_the_runner_is_refused_and_nothing_is_left_behind(capsys):
    worktrees = git("worktree", "list", "--porcelain")
    root_commit = git("rev-list", "--max-parents=0", "HEAD").split()[0]
    assert run_benchmark(get("packed"), ["--smoke", "--base", root_commit]) == 2
    assert "predates the benchmark runner" in capsys.readouterr().err
    assert git("worktree", "list", "--porcelain") == worktrees


@needs_git
@pytest.mark.skipif(not has_runner("HEAD"), reason="HEAD predates the runner")
def test_an_ab_run_against_head_compares_every_cell_and_removes_its_worktree(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LAYERZOO_NATIVE", "0")  # the fresh worktree would build its compiled kernels first
    worktrees = git("worktree", "list", "--porcelain")
    out = tmp_path / "ab.json"
    argv = ["--smoke", "--seq-len", "64", "--base", "HEAD", "--passes", "1", "--out", str(out)]
    assert run_benchmark(get("packed"), argv) == 0
    data = json.loads(out.read_text())
    assert data["base"]["commit"] == git("rev-parse", "HEAD").strip() and data["passes"] == 1
    assert data["rows"] and not data["only_current"] and not data["only_base"]
    assert all(row["seconds_ratio"] > 0 for row in data["rows"])
    assert "seconds current / base" in capsys.readouterr().out
    assert git("worktree", "list", "--porcelain") == worktrees
