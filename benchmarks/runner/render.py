"""Tables rendered from the results files into the docs, between generated markers, never typed.

docs/benchmarks.md holds a region per benchmark (but those on their topic's page, TOPIC_PAGES) and
README.md (and the docs page) the summary:

    <!-- benchmarks:swa:start -->
    (the context line and tables of benchmarks/results/swa.json, or "not measured yet: ...")
    <!-- benchmarks:swa:end -->

`python -m benchmarks render` rewrites every region from the results; `--check` only says
whether the committed files are what the committed results render.
"""

from __future__ import annotations

import re
from pathlib import Path

from .registry import NAMES, get
from .results import RESULTS, read_json
from .summary import HEAD, SummaryRow
from .tables import markdown_table
from .timing import matmul_gflops

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs" / "benchmarks.md"
# Benchmarks whose region is on the page of what they measure instead of docs/benchmarks.md.
TOPIC_PAGES = {"context": ROOT / "docs" / "parallel.md"}
SUMMARY = "summary"
REGION = re.compile(r"(?P<start><!-- benchmarks:(?P<key>[\w-]+):start -->\n).*?(?P<end><!-- benchmarks:(?P=key):end -->)",
                    re.S)


def not_measured(name: str) -> str:
    return f"not measured yet: run `python -m benchmarks {name}`"


def context_line(data: dict) -> str:
    """Where and from what a results file was measured, in one line (a smoke run says so first)."""
    context = data["context"]
    machine = context["machine"]
    device = f"{machine['gpu']}, " if machine.get("gpu") else ""
    versions = ", ".join(f"{name} {version}" for name, version in context["versions"].items() if version)
    commit = context["git"]["commit"]
    commit = "no git checkout" if commit is None else f"commit {commit[:10]}{' (dirty)' if context['git']['dirty'] else ''}"
    gflops = matmul_gflops(data["rows"])
    matmul = "" if gflops is None else f"; fp32 matmul {gflops:.1f} GFLOP/s"
    smoke = "Smoke run (tiny shapes, times mean nothing): " if data["config"].get("smoke") else ""
    return (f"_{smoke}{device}{machine['cpu']} ({machine['cores']} cores), {machine['platform']}; "
            f"{context['threads']} thread{'s' if context['threads'] != 1 else ''}; {versions}; {commit}; "
            f"{context['date']}{matmul}._")


def render_results(data: dict) -> str:
    """A results file's context line and its benchmark's tables."""
    return f"{context_line(data)}\n\n{get(data['benchmark']).render(data).strip()}"


def load(results: Path, name: str) -> dict | None:
    path = results / f"{name}.json"
    return read_json(path) if path.exists() else None


def summary(results: Path) -> str:
    """The README's summary: each kernel against its best peer, one row per kernel and mode, then
    the context of each run the rows come from (or the line saying it has not run)."""
    rows: list[SummaryRow] = []
    notes = []
    for name in NAMES:
        benchmark = get(name)
        if benchmark.summary is None:
            continue
        data = load(results, name)
        if data is None:
            notes.append(f"- `{name}`: {not_measured(name)}")
            continue
        rows += benchmark.summary(data)
        notes.append(f"- `{name}`: {context_line(data)}")
    table = [markdown_table(HEAD, rows)] if rows else []
    return "\n\n".join(table + ["\n".join(notes)])


def region(key: str, results: Path) -> str:
    if key == SUMMARY:
        return summary(results)
    data = load(results, key)
    return not_measured(key) if data is None else render_results(data)


def rendered(text: str, results: Path) -> str:
    """text with every benchmarks region's content rendered afresh."""
    return REGION.sub(lambda match: f"{match['start']}{region(match['key'], results)}\n{match['end']}", text)


def regions(text: str) -> list[str]:
    return [match["key"] for match in REGION.finditer(text)]


def render_docs(results: Path = RESULTS, readme: Path = README, docs: Path = DOCS,
                topic_pages: dict[str, Path] | None = None) -> dict[Path, str]:
    """{file: its text with the regions rendered}. Every benchmark has one region, in the docs page
    or on its topic's page (topic_pages, default TOPIC_PAGES), the summary one in the README;
    unknown regions are an error, so a renamed benchmark cannot leave stale tables behind."""
    topic_pages = TOPIC_PAGES if topic_pages is None else topic_pages
    expected = {readme: [SUMMARY], docs: [SUMMARY, *(name for name in NAMES if name not in topic_pages)]}
    for name, page in topic_pages.items():
        expected.setdefault(page, []).append(name)
    texts = {path: path.read_text() for path in expected}
    for path, text in texts.items():
        found = regions(text)
        if sorted(found) != sorted(expected[path]):
            raise ValueError(f"{path.name}: benchmark regions {found}, expected {expected[path]}")
    return {path: rendered(text, results) for path, text in texts.items()}


def stale(results: Path = RESULTS, readme: Path = README, docs: Path = DOCS,
          topic_pages: dict[str, Path] | None = None) -> list[Path]:
    """The files whose regions differ from what the results render."""
    return [path for path, text in render_docs(results, readme, docs, topic_pages).items() if path.read_text() != text]


def write_docs(results: Path = RESULTS, readme: Path = README, docs: Path = DOCS) -> list[Path]:
    """Render the regions in place; returns the files that changed."""
    changed = []
    for path, text in render_docs(results, readme, docs).items():
        if path.read_text() != text:
            path.write_text(text)
            changed.append(path)
    return changed
