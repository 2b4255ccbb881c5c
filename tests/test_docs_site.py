"""The docs site builds with `mkdocs build --strict`: no broken link or anchor, no page missing
from the nav, every API reference resolved, the command-line reference rendered from the parser."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from docs.hooks.cli_reference import commands
from layerzoo.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="the docs extra's (the test extra has it)")
    out = tmp_path_factory.mktemp("site")
    environment = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)], cwd=ROOT,
                            capture_output=True, text=True, env=environment)
    assert result.returncode == 0, result.stderr[-5000:]
    return out


def test_the_site_builds_strictly_with_every_page(site):
    for page in ("index.html", "contract/index.html", "mixers/index.html", "api/layerzoo/index.html", "cli/index.html"):
        assert (site / page).is_file(), page


def test_the_command_line_page_has_every_command(site):
    html = (site / "cli" / "index.html").read_text()
    names = [parser.prog for parser, _ in commands(build_parser())]
    assert "layerzoo tokenizer train" in names and "layerzoo distill" in names
    for name in names:
        assert re.search(rf"<h2 id=\"[^\"]*\"><code>{re.escape(name)}</code>", html), name
    assert "cli-reference" not in html
    from benchmarks.runner.registry import NAMES

    for name in NAMES:
        assert f"<code>python -m benchmarks {name}</code>" in html, name


def test_each_mixer_page_has_its_options_table(site):
    import layerzoo

    for name in layerzoo.list_mixers():
        html = (site / "mixers" / name / "index.html").read_text()
        assert "<!-- options" not in html, name
        for option in layerzoo.get_mixer(name).options:
            assert f"<code>{option}</code>" in html, (name, option)


def test_the_tasks_page_has_each_tasks_options_table(site):
    from layerzoo.options import declared
    from layerzoo.tasks import TASKS

    html = (site / "tasks" / "index.html").read_text()
    assert "<!-- options" not in html
    for task in TASKS.values():
        for option in declared(task):
            assert f"<code>{option}</code>" in html, (task.name, option)


def test_the_api_pages_render_the_docstrings(site):
    html = (site / "api" / "layerzoo" / "index.html").read_text()
    for name in ("build", "load_spec", "register_mixer", "Mixer", "option"):
        assert f'id="layerzoo.' in html and re.search(rf"<code>{name}</code>|>{name}<", html), name
    assert 'id="layerzoo.assemblies.armt.wrap.wrap"' in (site / "api" / "armt" / "index.html").read_text()
    for page in (site / "api").glob("*/index.html"):  # a name that is also a module's renders the module
        assert "doc doc-object doc-module" not in page.read_text(), f"{page.parent.name}: a ::: target is a module"
