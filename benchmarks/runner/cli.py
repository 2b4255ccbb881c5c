"""`python -m benchmarks`: list the benchmarks, run one (or all), render the docs' tables."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from .against_base import render_comparison
from .context import ROOT
from .registry import NAMES, all_benchmarks, get
from .render import render_results, stale, write_docs
from .results import RESULTS, read_json
from .run import parse, run_benchmark

USAGE = """usage:
  python -m benchmarks [list]               the benchmarks, one line each
  python -m benchmarks NAME [options]       run one (python -m benchmarks NAME --help: its options)
  python -m benchmarks all [options]        run every one that can run here, each in its own process
  python -m benchmarks render [--check]     render the docs' tables from benchmarks/results/*.json
  python -m benchmarks render FILE.json...  print the tables of these results files"""


def list_benchmarks() -> int:
    width = max(map(len, NAMES))
    for benchmark in all_benchmarks():
        print(f"{benchmark.name:<{width}}  {benchmark.description}")
    return 0


def render(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks render", allow_abbrev=False)
    parser.add_argument("files", nargs="*", type=Path, help="results files to print (default: render the docs)")
    parser.add_argument("--check", action="store_true", help="exit 1 if the docs differ from what the results render")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder (default: benchmarks/results)")
    args = parser.parse_args(argv)
    if args.files:
        for path in args.files:
            data = read_json(path)
            print(render_comparison(data) if "base" in data else render_results(data), end="\n\n")
        return 0
    if args.check:
        changed = stale(args.results)
        for path in changed:
            print(f"{path.name} differs from what the results render: run `python -m benchmarks render`", file=sys.stderr)
        return 1 if changed else 0
    for path in write_docs(args.results):
        print(f"rendered {path}", file=sys.stderr)
    return 0


def run_all(argv: list[str]) -> int:
    """Every benchmark that can run here, in its own process, with argv (runner options such as
    --smoke, --threads, --reps); those that cannot run here say why and are skipped."""
    if any(option.startswith(("--out", "--base", "--probe-memory")) for option in argv):
        print("all: --out, --base and --probe-memory are options of one benchmark's run", file=sys.stderr)
        return 2
    failed = []
    for benchmark in all_benchmarks():
        why_not = benchmark.unavailable(parse(benchmark, argv))
        if why_not:
            print(f"skipped {benchmark.name}: {why_not}", file=sys.stderr)
            continue
        print(f"running {benchmark.name}", file=sys.stderr, flush=True)
        if subprocess.run([sys.executable, "-m", "benchmarks", benchmark.name, *argv], cwd=ROOT).returncode != 0:
            failed.append(benchmark.name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    command, rest = (argv[0], argv[1:]) if argv else ("list", [])
    if command in ("-h", "--help"):
        print(USAGE)
        return 0
    if command == "list":
        return list_benchmarks()
    if command == "render":
        return render(rest)
    if command == "all":
        return run_all(rest)
    if command not in NAMES:
        print(f"no benchmark {command!r}; the benchmarks are: {', '.join(NAMES)}\n\n{USAGE}", file=sys.stderr)
        return 2
    return run_benchmark(get(command), rest, reexecute=True)
