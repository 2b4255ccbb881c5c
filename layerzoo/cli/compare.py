"""`layerzoo compare RUN_OR_SWEEP...`: runs and sweeps side by side (metric against context length,
loss, tokens/s, state size), as Markdown, JSON and a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path

from .arguments import check_at_least_one


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="runs and sweeps side by side: metric against context length "
                                            "(mean, min-max over seeds), loss, tokens/s, state size")
    parser.add_argument("folders", nargs="+", metavar="RUN_OR_SWEEP",
                        help="run folders (each its own group), sweep folders (a group per grid point) and "
                             "SWEEP/GROUP (one grid point of a sweep)")
    parser.add_argument("--metric", choices=("niah", "perplexity", "loss"),
                        help="niah: the accuracy grid's mean over depths; perplexity: what `eval --metric "
                             "perplexity` wrote; loss: training loss (default: niah, else perplexity, else loss, "
                             "by what the first run has)")
    parser.add_argument("--window", type=int, metavar="W", help="the test window whose reports to read (default: each run's own)")
    parser.add_argument("--out", metavar="PREFIX",
                        help="write PREFIX.md, PREFIX.json and PREFIX.png (default: <first folder>/compare-<metric>)")


def run(args: argparse.Namespace) -> int:
    from ..training.sweeps.compare import compare, to_markdown, write_comparison

    check_at_least_one("--window", args.window)
    comparison = compare(args.folders, args.metric, args.window)
    paths = write_comparison(comparison, args.out or Path(args.folders[0]) / f"compare-{comparison['metric']}")
    print(to_markdown(comparison), end="")
    print(f"wrote {', '.join(map(str, paths))}")
    return 0
