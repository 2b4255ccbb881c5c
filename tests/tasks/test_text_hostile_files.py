"""Hostile corpus and tokenizer files: each is one line naming the file (and the line, column or
key), exit 2 from the CLI, and no token cache or tokenizer left half-built."""

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from layerzoo.cli import main
from layerzoo.errors import OptionError
from layerzoo.tasks import make_task
from layerzoo.tasks.text import load_tokenizer, train_bpe
from layerzoo.tasks.text.cache import cache_root
from tests.helpers.text_corpus import cache  # noqa: F401 (a fixture)

# in the test extra; where it is missing (the GPU image) the module is skipped, not a collection error
pyarrow = pytest.importorskip("pyarrow")
import pyarrow.parquet  # noqa: E402


def one_line(call) -> str:
    """The message of the OptionError `call()` raises, checked to be one line."""
    with pytest.raises(OptionError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message, message
    return message


def cli_error(capsys) -> str:
    """The one `layerzoo: error:` line on stderr (progress bars aside), checked to be the only one."""
    lines = [line for line in capsys.readouterr().err.replace("\r", "\n").splitlines() if line.startswith("layerzoo:")]
    assert len(lines) == 1 and lines[0].startswith("layerzoo: error: "), lines
    return lines[0]


def prepare(path: Path, tokenizer: str = "bytes") -> None:
    vocab = int(tokenizer[4:]) if tokenizer.startswith("bpe:") else 257
    make_task("text", {"files": [str(path)], "tokenizer": tokenizer}, vocab).prepare(progress=False)


def assert_nothing_half_built() -> None:
    root = cache_root()
    left = [path.name for folder in ("shards", "tokenizers") if (root / folder).is_dir()
            for path in (root / folder).iterdir() if not path.name.endswith(".lock")]
    assert left == [], left


nesting = st.tuples(st.sampled_from(["[", '{"text": ', '{"a": [']), st.integers(1_000, 100_000), st.booleans())


@given(nesting=nesting, line=st.integers(1, 3))
def test_a_deeply_nested_jsonl_line_is_one_line_naming_file_and_line(nesting, line):
    opener, depth, closed = nesting
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "deep.jsonl"
        deep = opener * depth + ("]" * depth if closed and opener == "[" else "")
        path.write_text("".join(json.dumps({"text": f"doc {i}"}) + "\n" for i in range(1, line)) + deep + "\n")
        message = one_line(lambda: prepare(path))
        assert f"{path}:{line}:" in message


def test_a_deeply_nested_jsonl_line_through_the_cli(tmp_path, cache, capsys):  # noqa: F811
    path = tmp_path / "deep.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n" + "[" * 100_000 + "\n")
    assert main(["tokenizer", "train", str(path), "--vocab-size", "260", "--out", str(tmp_path / "tok")]) == 2
    assert f"{path}:2:" in cli_error(capsys)
    assert not (tmp_path / "tok").exists()
    with pytest.raises(OptionError, match=f"{path}:2:"):
        prepare(path, "bpe:260")
    assert_nothing_half_built()


@pytest.mark.parametrize("line, words", [
    ("[1, 2]", "no text field 'text'"), ('"text"', "no text field 'text'"), ('{"body": "x"}', "no text field 'text'"),
    ('{"text": 5}', "field 'text' holds a number, not text"), ('{"text": null}', "field 'text' holds null, not text"),
    ('{"text": ["a"]}', "field 'text' holds an array, not text"), ("{'text': 'x'}", "not a JSON object"),
])
def test_a_jsonl_line_without_text_is_one_line_naming_file_and_line(tmp_path, cache, line, words):  # noqa: F811
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n\n" + line + "\n")
    message = one_line(lambda: prepare(path))
    assert f"{path}:3: {words}" in message, message


def test_a_jsonl_file_with_a_byte_order_mark_is_read(tmp_path, cache):  # noqa: F811
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(json.dumps({"text": text}).encode() for text in ("first", "second")))
    task = make_task("text", {"files": [str(path)]}, 257)
    assert [bytes(task.shards.document(i)[1:].tolist()) for i in range(2)] == [b"first", b"second"]


COLUMNS = {
    "int64": pyarrow.array([1, 2, 3]),
    "double": pyarrow.array([1.5, 2.5, 3.5]),
    "bool": pyarrow.array([True, False, True]),
    "binary": pyarrow.array([b"abc", b"def", b"ghi"]),
    "large_binary": pyarrow.array([b"abc", b"def", b"ghi"], type=pyarrow.large_binary()),
    "list<element: string>": pyarrow.array([["a"], ["b"], ["c"]]),
    "struct<a: string>": pyarrow.array([{"a": "x"}, {"a": "y"}, {"a": "z"}]),
    "null": pyarrow.array([None, None, None]),
}


@pytest.mark.parametrize("kind", COLUMNS)
@pytest.mark.parametrize("tokenizer", ["bytes", "bpe:260"])
def test_a_parquet_column_that_is_not_text_is_one_line_naming_file_column_and_type(tmp_path, cache, kind,  # noqa: F811
                                                                                    tokenizer):
    path = tmp_path / "bad.parquet"
    pyarrow.parquet.write_table(pyarrow.table({"text": COLUMNS[kind]}), path)
    message = one_line(lambda: prepare(path, tokenizer))
    assert f"{path}: column 'text' holds {kind}" in message, message
    assert_nothing_half_built()


@pytest.mark.parametrize("column", [
    pyarrow.array(["first document", None, "second document"]),
    pyarrow.array(["first document", "second document"], type=pyarrow.large_string()),
    pyarrow.array(["first document", "second document", "first document"]).dictionary_encode(),
])
def test_parquet_string_columns_are_read(tmp_path, cache, column):  # noqa: F811
    path = tmp_path / "good.parquet"
    pyarrow.parquet.write_table(pyarrow.table({"text": column}), path)
    task = make_task("text", {"files": [str(path)]}, 257)
    expected = [text for text in column.to_pylist() if text]
    assert [bytes(task.shards.document(i)[1:].tolist()).decode() for i in range(len(expected))] == expected


def parquet_bytes() -> bytes:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.parquet"
        pyarrow.parquet.write_table(pyarrow.table({"text": [f"document {i} " * 20 for i in range(50)]}), path,
                                    row_group_size=10)
        return path.read_bytes()


PARQUET = parquet_bytes()


@given(start=st.integers(0, len(PARQUET) - 1), garbage=st.binary(min_size=1, max_size=64), cut=st.booleans())
def test_a_corrupt_or_truncated_parquet_reads_or_is_one_line_naming_the_file(start, garbage, cut):
    data = PARQUET[:start] if cut else PARQUET[:start] + garbage + PARQUET[start + len(garbage):]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "corrupt.parquet"
        path.write_bytes(data)
        try:
            prepare(path)
        except OptionError as error:
            assert str(error).startswith(f"files: {path}: ") and "\n" not in str(error), str(error)


@pytest.mark.parametrize("content", [b"not parquet at all", b"", b"PAR1" + b"\0" * 100 + b"PAR1"])
def test_a_garbage_parquet_through_the_cli(tmp_path, cache, capsys, content):  # noqa: F811
    path = tmp_path / "garbage.parquet"
    path.write_bytes(content)
    assert main(["tokenizer", "train", str(path), "--vocab-size", "260", "--out", str(tmp_path / "tok")]) == 2
    assert f"{path}: not a readable Parquet file" in cli_error(capsys)


@pytest.mark.parametrize("content", [b"{", b'{"eos_token": ', b"\xff\xfe{}", b"[1, 2]", b'"text"', b"[" * 100_000])
def test_a_broken_tokenizer_config_is_one_line_naming_it(tmp_path, content):
    folder = train_bpe(["x = 1\n"] * 10, 260, tmp_path / "tok")
    (folder / "tokenizer_config.json").write_bytes(content)
    message = one_line(lambda: load_tokenizer(str(folder)))
    assert message.startswith(f"tokenizer: {folder / 'tokenizer_config.json'}: "), message
