"""Local corpora: file patterns resolved to files, files read as documents.

A pattern is a path or a glob (`**` recurses); `stdlib:PATTERN` is relative to this Python's
standard library (sysconfig's "stdlib" path), the one corpus every machine has, without the
site-packages / dist-packages folders some installations keep inside it (third-party code that
differs from machine to machine). Formats by extension: `.jsonl` (one JSON object per line, the
document in `field`), `.parquet` (the document in column `field`), anything else plain UTF-8 text,
one document per file. Bytes that are not UTF-8 are replaced (U+FFFD), so any file can be read.
"""

from __future__ import annotations

import glob
import json
import os
import re
import sysconfig
from collections.abc import Iterator
from pathlib import Path

from ...errors import OptionError

STDLIB = "stdlib:"
THIRD_PARTY = ("site-packages", "dist-packages")
JSON_TYPES = {dict: "an object", list: "an array", bool: "a boolean", int: "a number", float: "a number",
              type(None): "null"}


def resolve_files(patterns: tuple[str, ...]) -> list[Path]:
    """The files `patterns` name, each pattern's matches sorted, in pattern order, without repeats.
    OptionError("files") for a pattern that matches no file."""
    files: dict[Path, None] = {}
    for pattern in patterns:
        matches = stdlib_matches(pattern[len(STDLIB):]) if pattern.startswith(STDLIB) else [
            Path(path) for path in sorted(glob.glob(os.path.expanduser(pattern), recursive=True))]
        matches = [path for path in matches if path.is_file()]
        if not matches:
            raise OptionError("files", f"{pattern}: no such file (a path, a glob, or stdlib:GLOB)")
        files.update(dict.fromkeys(matches))
    return list(files)


def stdlib_matches(pattern: str) -> list[Path]:
    """The standard library's files that match the glob `pattern`. Walked rather than globbed, so
    that the third-party folders (often larger than the library) are skipped, not listed."""
    root = Path(sysconfig.get_paths()["stdlib"])
    matcher = glob_regex(pattern)
    found = []
    for folder, subfolders, names in os.walk(root):
        if Path(folder) == root:
            subfolders[:] = [name for name in subfolders if name not in THIRD_PARTY]
        relative = Path(folder).relative_to(root)
        found += [root / relative / name for name in names if matcher.fullmatch((relative / name).as_posix())]
    return sorted(found)


def glob_regex(pattern: str) -> re.Pattern:
    """glob's syntax as a regex on '/'-separated relative paths: `**/` any folders (or none), `*`
    and `?` within one name, `[...]` a character class."""
    parts, index = [], 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] in "*?":
            parts.append("[^/]*" if pattern[index] == "*" else "[^/]")
            index += 1
        elif pattern[index] == "[" and "]" in pattern[index + 2:]:
            end = pattern.index("]", index + 2)
            body = pattern[index + 1:end]
            parts.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            index = end + 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(parts))


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
    with path.open(encoding="utf-8", errors="replace") as lines:
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
