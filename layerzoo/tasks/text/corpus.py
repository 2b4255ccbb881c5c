"""Local corpora: files read as documents (discovery.py finds the files).

Formats by extension: `.jsonl` (one JSON object per line, the document in `field`), `.parquet`
(the document in column `field`), anything else plain UTF-8 text, one document per file. Bytes
that are not UTF-8 are replaced (U+FFFD), so any file can be read.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from ...errors import OptionError

JSON_TYPES = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number",
              type(None): "null"}


def file_format(path: Path) -> str:
    """'jsonl', 'parquet' or 'text', by extension."""
    suffix = path.suffix.lower()
    return {".jsonl": "jsonl", ".parquet": "parquet"}.get(suffix, "text")


def read_documents(path: Path, field: str) -> Iterator[str]:
    """The documents of one file, in order; empty documents are skipped. OptionError naming the
    file (and line) for a JSONL line that is not a JSON object, a JSONL line or Parquet file
    without a text `field`, and a Parquet file pyarrow cannot read."""
    kind = file_format(path)
    if kind == "text":
        documents = iter([path.read_bytes().decode("utf-8", errors="replace")])
    elif kind == "jsonl":
        documents = jsonl_documents(path, field)
    else:
        documents = parquet_documents(path, field)
    yield from (document for document in documents if document)


def jsonl_documents(path: Path, field: str) -> Iterator[str]:
    # utf-8-sig: a leading byte-order mark (some Windows editors write one) is dropped, not read as JSON
    with path.open(encoding="utf-8-sig", errors="replace") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except (ValueError, RecursionError) as error:  # RecursionError: nested deeper than the parser recurses
                raise OptionError("files", f"{path}:{number}: not a JSON object ({error})") from None
            if not isinstance(record, dict) or field not in record:
                raise OptionError("field", f"{path}:{number}: no text field {field!r}")
            if not isinstance(record[field], str):
                raise OptionError("field", f"{path}:{number}: field {field!r} holds {JSON_TYPES[type(record[field])]}, "
                                           "not text (a string)")
            yield record[field]


def parquet_documents(path: Path, field: str) -> Iterator[str]:
    """The strings of column `field`; None is an empty document. OptionError for a file pyarrow
    cannot read (named, with pyarrow's first line) and for a column of another type."""
    try:
        import pyarrow
        import pyarrow.parquet as parquet
    except ImportError:
        raise OptionError("files", f"{path}: reading Parquet needs pyarrow: pip install 'layerzoo[text]'") from None
    try:
        table = parquet.ParquetFile(path)
        if field not in table.schema_arrow.names:
            raise OptionError("field", f"{path}: no column {field!r} (columns: {', '.join(table.schema_arrow.names)})")
        kind = table.schema_arrow.field(field).type
        if not is_text(kind):
            raise OptionError("field", f"{path}: column {field!r} holds {kind}, not text (a string column)")
        for batch in table.iter_batches(columns=[field], batch_size=1024):  # a row group at a time, not the file
            yield from (text or "" for text in batch.column(0).to_pylist())
    except (pyarrow.ArrowException, OSError, UnicodeDecodeError) as error:  # the last: a string that is not UTF-8
        first = str(error).strip().splitlines()[0][:200] if str(error).strip() else type(error).__name__
        raise OptionError("files", f"{path}: not a readable Parquet file ({first})") from None


def is_text(kind) -> bool:
    """Whether an Arrow type holds strings (plain, large, view, or dictionary-encoded strings)."""
    import pyarrow.types as types

    if types.is_dictionary(kind):
        kind = kind.value_type
    checks = (types.is_string, types.is_large_string, getattr(types, "is_string_view", None))  # views: pyarrow >= 16
    return any(check(kind) for check in checks if check is not None)


def documents(files: list[Path], field: str) -> Iterator[str]:
    """Every document of `files`, file by file."""
    for path in files:
        yield from read_documents(path, field)
