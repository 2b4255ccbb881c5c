"""Declared options as a table, for `layerzoo mixers NAME` (plain text) and the docs (Markdown)."""

from __future__ import annotations

from typing import Any, Iterable

from .section import OptionInfo, Section

HEADER = ("option", "type", "default", "allowed", "description")


def shown(value: Any) -> str:
    """A default as a spec author writes it in YAML: null, true, 1e-05, auto, [a, b]; a nested
    section's as "its defaults" (its own table lists them)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Section):
        return "its defaults"
    if isinstance(value, tuple):
        return "[" + ", ".join(map(shown, value)) + "]"
    return str(value)


def option_rows(options: Iterable[OptionInfo]) -> list[tuple[str, str, str, str, str]]:
    """One row per option: name, type, default ("required" without one), bounds or choices, description."""
    return [(info.name, info.type_text, "required" if info.required else shown(info.default),
             info.bounds or (", ".join(info.choices) if info.choices else ""), info.help)
            for info in options]


def text_table(rows: list[tuple[str, ...]], header: tuple[str, ...] = HEADER) -> str:
    """Columns padded to their widest cell, the last one left ragged."""
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header) - 1)]
    return "\n".join("  ".join([*(cell.ljust(width) for cell, width in zip(row, widths)), row[-1]]).rstrip()
                     for row in [header, *rows])


def markdown_table(rows: list[tuple[str, ...]], header: tuple[str, ...] = HEADER) -> str:
    """A Markdown table, names and defaults as code."""
    def cells(row: tuple[str, ...]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"

    code = [(f"`{name}`", kind, f"`{default}`" if default != "required" else default, allowed, text)
            for name, kind, default, allowed, text in rows]
    return "\n".join([cells(header), "|" + "---|" * len(header), *map(cells, code)])
