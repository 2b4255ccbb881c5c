"""`layerzoo sweep SPEC --grid KEY=V1,V2 ...`: a spec trained at every point of a grid of overrides
x seeds, J runs at a time, then compared."""

from __future__ import annotations

import argparse

from .arguments import add_overrides, check_at_least_one


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="train a spec at every point of a grid of overrides x seeds, J runs at a "
                                            "time, then compare them")
    parser.add_argument("spec", help="a shipped spec name or a YAML path with a training: section")
    parser.add_argument("--grid", action="append", default=[], metavar="KEY=V1,V2,...",
                        help="a spec key and its values (YAML; commas inside [] or {} do not split), e.g. "
                             "training.window.long=16,32,64 (repeatable: the cartesian product)")
    parser.add_argument("--seeds", type=int, default=1, metavar="N",
                        help="runs per grid point, with training.seed = the spec's seed + 0 .. N-1 (default 1)")
    parser.add_argument("--out", required=True, metavar="DIR", help="the sweep folder: sweep.json, a run folder per run, compare-*")
    parser.add_argument("--jobs", type=int, default=1, metavar="J",
                        help="training processes at a time; the threads are divided between them (default 1)")
    add_overrides(parser, "training.steps=100", "a spec value in every run")
    parser.add_argument("--max-runs", type=int, metavar="N",
                        help="refuse a sweep of more runs than this (grid points x seeds; default 10000)")


def run(args: argparse.Namespace) -> int:
    from ..training.sweeps.sweep import run_sweep

    check_at_least_one("--seeds", args.seeds)
    check_at_least_one("--jobs", args.jobs)
    check_at_least_one("--max-runs", args.max_runs)
    outcomes = run_sweep(args.spec, args.grid, args.seeds, args.out, jobs=args.jobs, overrides=args.overrides,
                         **({} if args.max_runs is None else {"max_runs": args.max_runs}))
    return 1 if any(outcome.status == "failed" for outcome in outcomes) else 0
