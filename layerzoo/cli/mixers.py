"""`layerzoo mixers [NAME]`: the registered mixers, or one mixer's options."""

from __future__ import annotations

import argparse


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="list registered mixers, or one mixer's options")
    parser.add_argument("name", nargs="?", help="a registered mixer: print its options (type, default, bounds, description)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--markdown", action="store_true", help="print the options tables as Markdown (the docs' tables)")
    shown.add_argument("--targets", action="store_true",
                       help="list the mixers `layerzoo convert` can make from a teacher's attention layers")


def run(args: argparse.Namespace) -> int:
    from ..options import markdown_table, option_rows, text_table
    from ..registry import get_mixer, list_mixers, list_targets

    if args.targets:
        print("\n".join(list_targets()))
        return 0
    names = [args.name] if args.name else list_mixers()
    entries = [get_mixer(name) for name in names]  # an unknown name fails here, naming the closest
    if args.markdown:
        print("\n\n".join(f"## `{entry.name}`\n\n{entry.summary}\n\n{markdown_table(option_rows(entry.options.values()))}"
                          for entry in entries))
    elif args.name:
        entry = entries[0]
        print(f"{entry.name}: {entry.summary}\n\n{text_table(option_rows(entry.options.values()))}")
    else:
        width = max(map(len, names))
        for entry in entries:
            print(f"{entry.name:<{width}}  {entry.summary}")
        print("\n`layerzoo mixers NAME` lists a mixer's options.")
    return 0
