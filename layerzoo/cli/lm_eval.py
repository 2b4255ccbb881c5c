"""`layerzoo lm-eval ARGS...`: lm-evaluation-harness's command line with layerzoo's model type registered."""

from __future__ import annotations

import argparse

from ..errors import LayerzooError


def add_parser(commands, name: str) -> None:
    # No option prefix that lm_eval's arguments could start with: every one of them is passed on as it is.
    parser = commands.add_parser(
        name, prefix_chars="\0", add_help=False,
        help="lm-evaluation-harness's command line (lm_eval ARGS...) with layerzoo models registered",
        description="Runs lm-evaluation-harness's command line, `lm_eval ARGS...`, in a process where layerzoo's "
                    "model type is registered, so that --model hf --model_args pretrained=DIR reads an exported "
                    "folder. ARGS are lm_eval's own: `lm_eval --help` lists them.")
    parser.add_argument("arguments", nargs=argparse.REMAINDER, metavar="ARGS")
    parser.set_defaults(parser=parser)


def run(args: argparse.Namespace) -> int:
    if args.arguments in ([], ["-h"], ["--help"]):  # this command's own help, before transformers and torch load
        if not args.arguments:
            args.parser.error("give lm_eval's arguments, e.g. --model hf --model_args pretrained=DIR --tasks hellaswag")
        args.parser.print_help()
        return 0
    try:
        from ..hf.harness import run_lm_eval

        return run_lm_eval(args.arguments)
    except ImportError as error:  # transformers or lm-evaluation-harness missing: the extra to install, in one line
        raise LayerzooError(str(error)) from None
