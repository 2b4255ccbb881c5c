"""`layerzoo specs`: the shipped specs and what each declares."""

from __future__ import annotations

import argparse


def add_parser(commands, name: str) -> None:
    commands.add_parser(name, help="list the shipped specs")


def run(args: argparse.Namespace) -> int:
    from ..specs import load_spec, shipped_specs

    names = shipped_specs()
    width = max(map(len, names))
    for name in names:
        print(f"{name:<{width}}  {load_spec(name).description or ''}")
    return 0
