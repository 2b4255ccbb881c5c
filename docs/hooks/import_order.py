"""MkDocs hook: the package's import order, rendered from tests/test_layers.py's LAYERS (where it is
declared once and enforced) into the page that holds `<!-- import-order -->`."""

from __future__ import annotations

import sys
from pathlib import Path

MARKER = "<!-- import-order -->"
ROOT = Path(__file__).resolve().parents[2]  # tests/ is the repository's, not installed


def order() -> str:
    """A numbered list, lowest layer first: its modules, then what they hold."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.test_layers import LAYERS

    def names(prefixes: tuple[str, ...]) -> str:
        return ", ".join(f"`layerzoo.{prefix}`" if prefix else "`layerzoo`" for prefix in prefixes)

    return "\n".join(f"{index}. {names(layer.prefixes)}: {layer.what}" for index, layer in enumerate(LAYERS, 1))


def on_page_markdown(markdown: str, **_) -> str:
    return markdown.replace(MARKER, order()) if MARKER in markdown else markdown
