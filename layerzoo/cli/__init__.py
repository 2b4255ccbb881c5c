"""The `layerzoo` command: one module a subcommand, each a parser and a call into the library
function that is also its Python API.

Building the parser imports nothing heavy (each command imports what it needs when it runs), so
help and argument errors answer before torch is imported. Errors a user can fix (a bad spec,
option or file) print as one line, without a traceback.
"""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..errors import LayerzooError
from . import (compare, convert, describe, distill, evaluate, export, kernels, lm_eval, mixers, plot, specs, sweep,
               tokenizer, train)

# In the order `layerzoo --help` lists them.
COMMANDS = {"specs": specs, "mixers": mixers, "describe": describe, "train": train, "eval": evaluate,
            "tokenizer": tokenizer, "plot": plot, "sweep": sweep, "compare": compare, "export": export,
            "convert": convert, "lm-eval": lm_eval, "distill": distill, "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # help and argument errors end here, before torch is imported
    try:
        return COMMANDS[args.command].run(args)
    except (LayerzooError, ValueError, OSError) as error:
        print(f"layerzoo: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as stop:  # training's says what it saved, and carries the signal's exit code
        print(f"layerzoo: {stop or 'interrupted'}", file=sys.stderr)
        return getattr(stop, "exit_code", 130)


def build_parser() -> argparse.ArgumentParser:
    """The command line: every subcommand and its arguments."""
    parser = argparse.ArgumentParser(
        prog="layerzoo", description="List mixers and specs; describe, train and evaluate the model a spec declares.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items():
        command.add_parser(commands, name)
    return parser


__all__ = ["build_parser", "main"]
