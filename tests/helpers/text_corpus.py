"""Small corpora for the text tests, written per test: plain text, JSONL and Parquet files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

WORDS = "def class return import yield lambda while for self value total index result".split()


def document(seed: int, words: int) -> str:
    """A deterministic pseudo-Python document of `words` words, with a non-ASCII character."""
    state, out = seed + 1, []
    for index in range(words):
        state = (state * 1103515245 + 12345) % 2**31
        out.append(WORDS[state % len(WORDS)] + ("\n    " if index % 9 == 8 else " "))
    return f"# é document {seed}\n" + "".join(out)


def write_corpus(folder: Path, words: int = 60) -> dict[str, list[str]]:
    """a.txt and b.txt (one document each), c.jsonl (three, field `text`), d.parquet (two, column
    `text`); returns each file's documents."""
    import pyarrow
    import pyarrow.parquet

    folder.mkdir(parents=True, exist_ok=True)
    files = {"a.txt": [document(0, words)], "b.txt": [document(1, words)],
             "c.jsonl": [document(seed, words) for seed in (2, 3, 4)], "d.parquet": [document(seed, words) for seed in (5, 6)]}
    for name in ("a.txt", "b.txt"):
        (folder / name).write_text(files[name][0], encoding="utf-8")
    (folder / "c.jsonl").write_text("".join(json.dumps({"id": i, "text": text}) + "\n" for i, text in enumerate(files["c.jsonl"])))
    pyarrow.parquet.write_table(pyarrow.table({"text": files["d.parquet"]}), folder / "d.parquet")
    return files


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private LAYERZOO_CACHE for the test."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("LAYERZOO_CACHE", str(folder))
    return folder
