"""MkDocs hook: options tables rendered from their declarations when the site builds.

A page holds `<!-- options: mixer NAME -->` (a registered mixer: what `layerzoo mixers NAME
--markdown` prints as its table; docs/mixers.md, all of them in one page, is that command's output
committed, and tests/test_docs.py keeps it current) or `<!-- options: task NAME -->` (a training
task's options), and this replaces each marker with the table.
"""

from __future__ import annotations

import re

MARKER = re.compile(r"<!-- options: (mixer|task) (\w+) -->")


def declared_options(kind: str, name: str) -> list:
    if kind == "mixer":
        from layerzoo.registry import get_mixer

        return list(get_mixer(name).options.values())
    from layerzoo.options import declared
    from layerzoo.tasks import TASKS

    return list(declared(TASKS[name]).values())


def table(match: re.Match) -> str:
    from layerzoo.options import markdown_table, option_rows

    return markdown_table(option_rows(declared_options(*match.groups())))


def on_page_markdown(markdown: str, **_) -> str:
    return MARKER.sub(table, markdown)
