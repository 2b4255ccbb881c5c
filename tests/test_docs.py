"""The docs say what the code does: the options tables are the declarations', the README's examples run."""

import re
from pathlib import Path

import layerzoo
from layerzoo.cli import main

ROOT = Path(__file__).resolve().parents[1]


def readme_block(heading: str) -> str:
    """The first ```python block after a README heading."""
    text = (ROOT / "README.md").read_text()
    return re.search(r"```python\n(.*?)```", text[text.index(heading):], re.S).group(1)


def test_the_mixers_page_is_what_the_declarations_print(capsys):
    assert main(["mixers", "--markdown"]) == 0
    tables = capsys.readouterr().out
    page = (ROOT / "docs" / "mixers.md").read_text()
    assert page.endswith(tables), "docs/mixers.md is stale: run `layerzoo mixers --markdown` (see its first lines)"


def test_the_readmes_own_mixer_example_runs_as_written():
    try:
        namespace = {}
        exec(compile(readme_block("### Your own mixer"), "README.md (Your own mixer)", "exec"), namespace)
        model = namespace["model"]
        assert [layer.type for layer in model.config.layers] == ["ema", "swa"]
        assert layerzoo.get_mixer("ema").options["n_heads"].help == "heads, each with its own decay"
    finally:
        layerzoo.unregister_mixer("ema")
