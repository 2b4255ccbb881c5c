"""`layerzoo describe SPEC`: a spec's model layer by layer (mixers, parameters, state sizes)."""

from __future__ import annotations

import argparse

from .arguments import add_overrides, check_at_least_one


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="per-layer mixers, parameters and state sizes of a spec")
    parser.add_argument("spec", help="a shipped spec name or a YAML path")
    parser.add_argument("--seq-len", type=int, default=4096, help="length at which to report state sizes (default 4096)")
    add_overrides(parser, "model.d_model=256")
    parser.add_argument("--dump", action="store_true", help="print the resolved spec as YAML instead")


def run(args: argparse.Namespace) -> int:
    from ..assemblies.summary import describe
    from ..specs import load_spec

    check_at_least_one("--seq-len", args.seq_len)
    spec = load_spec(args.spec, args.overrides)
    print(spec.to_yaml() if args.dump else describe(spec, args.seq_len), end="" if args.dump else "\n")
    return 0
