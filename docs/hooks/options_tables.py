"""MkDocs hook: each mixer page's options table, rendered from the mixer's declaration when the
site builds.

A page under docs/mixers/ holds the prose and an `<!-- options: NAME -->` marker; this replaces the
marker with what `layerzoo mixers NAME --markdown` prints as its table (docs/mixers.md, all the
tables in one page, is that command's output committed, and tests/test_docs.py keeps it current).
"""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- options: (\w+) -->")


def table(match: re.Match) -> str:
    from layerzoo.options import markdown_table, option_rows
    from layerzoo.registry import get_mixer

    return markdown_table(option_rows(get_mixer(match.group(1)).options.values()))


def on_page_markdown(markdown: str, page, **_) -> str:
    if not page.file.src_uri.startswith("mixers/"):
        return markdown
    if not MARKER.search(markdown):
        raise ValueError(f"docs/{page.file.src_uri}: no <!-- options: NAME --> marker for the options table")
    return MARKER.sub(table, markdown)
