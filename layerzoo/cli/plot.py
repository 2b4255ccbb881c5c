"""`layerzoo plot RUN...`: runs' training and validation loss, learning rate and window, as a PNG."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="training and validation loss, learning rate and window of runs, as a PNG")
    parser.add_argument("runs", nargs="+", help="run folders (their metrics.jsonl), drawn on one figure")
    parser.add_argument("--out", help="PNG path (default: <first run>/loss.png)")


def run(args: argparse.Namespace) -> int:
    from ..training.runs.loss_plot import plot_runs

    print(f"wrote {plot_runs(args.runs, args.out or Path(args.runs[0]) / 'loss.png')}")
    return 0
