"""docs/serving.md's Python block runs as written, on a folder named as the page names it."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from tests.helpers.hf_teachers import save_tokenizer
from tests.helpers.vllm_serving import VOCAB, save_model
from tests.test_docs import DOCS, fenced_blocks


def test_the_serving_pages_python_block_runs(tmp_path, monkeypatch, capsys):
    (code,) = [code for heading, language, code, _ in fenced_blocks(DOCS / "serving.md") if language == "python"]
    save_model(tmp_path / "my-model", ["swa", "gated_deltanet"])
    save_tokenizer(tmp_path / "my-model", VOCAB)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "docs/serving.md", "exec"), {})
    assert capsys.readouterr().out.strip()
