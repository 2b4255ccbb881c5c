"""MkDocs hook: the command-line reference, rendered from the argument parsers when the site builds.

docs/cli.md holds the prose and a `<!-- cli-reference -->` marker; this replaces the marker with a
table of layerzoo's commands and a section per command (its help line, then its `--help` text at a
fixed width), then `python -m benchmarks`: its usage, the runner's options every benchmark takes,
and each benchmark's own. So the page is always the parsers', and nothing generated is committed
(argparse's layout differs between Python versions).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

MARKER = "<!-- cli-reference -->"
ROOT = Path(__file__).resolve().parents[2]  # the benchmarks package is the repository's, not installed
WIDTH = "80"


def commands(parser: argparse.ArgumentParser) -> list[tuple[argparse.ArgumentParser, str]]:
    """(parser, help line) of every command under parser, depth first in the order they were added."""
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                found.append((sub, helps.get(name, "")))
                found += commands(sub)
    return found


def help_text(parser: argparse.ArgumentParser) -> str:
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = WIDTH  # argparse wraps at the terminal's width; the page's is fixed
    try:
        return parser.format_help().rstrip()
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


def reference() -> str:
    """A table of the commands (each linked to its section), then a section per command."""
    from layerzoo.cli import build_parser

    parser = build_parser()
    found = commands(parser)
    rows = [f"| [`{sub.prog}`](#{sub.prog.replace(' ', '-')}) | {line} |" for sub, line in found]
    sections = [f"{parser.description}\n\n| command | what it does |\n|---|---|\n" + "\n".join(rows)]
    for sub, line in found:
        summary = f"{line[0].upper()}{line[1:]}.\n\n" if line else ""
        sections.append(f"## `{sub.prog}`\n\n{summary}```text\n{help_text(sub)}\n```")
    return "\n\n".join(sections)


def benchmarks_reference() -> str:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from benchmarks.runner.arguments import add_runner_arguments
    from benchmarks.runner.cli import USAGE
    from benchmarks.runner.registry import all_benchmarks

    runner = argparse.ArgumentParser(prog="python -m benchmarks NAME", add_help=False)
    add_runner_arguments(runner)
    sections = ["## `python -m benchmarks`\n\nRun from the repository root ([Benchmarks](benchmarks.md)).\n\n"
                f"```text\n{USAGE}\n```\n\nThe options every benchmark takes:\n\n```text\n{help_text(runner)}\n```"]
    for benchmark in all_benchmarks():
        own = argparse.ArgumentParser(prog=f"python -m benchmarks {benchmark.name}", add_help=False)
        benchmark.add_arguments(own)
        sections.append(f"### `python -m benchmarks {benchmark.name}`\n\n{benchmark.description.rstrip('.')}; "
                        f"besides the runner's options:\n\n```text\n{help_text(own)}\n```")
    return "\n\n".join(sections)


def on_page_markdown(markdown: str, page, **_) -> str:
    if page.file.src_uri != "cli.md":
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"docs/cli.md: no {MARKER} marker for the command reference")
    return markdown.replace(MARKER, f"{reference()}\n\n{benchmarks_reference()}")
