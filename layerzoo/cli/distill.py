"""`layerzoo distill CONVERTED --out RUN_DIR`: a conversion distilled from its teacher, measured and
written as a transformers folder (layerzoo.convert.distill_folder)."""

from __future__ import annotations

import argparse

from ..errors import LayerzooError
from .arguments import add_overrides


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="distil a converted model from its teacher (per-layer alignment, then KL end "
                                            "to end), measure its reliance on its recurrent layers, and write it as a "
                                            "transformers folder (torchrun: data and context parallel)")
    parser.add_argument("converted", help="a folder `layerzoo convert` wrote")
    parser.add_argument("--out", required=True, metavar="RUN_DIR",
                        help="the run folder: spec.yaml, a folder per stage, reports, the student in model/")
    parser.add_argument("--config", metavar="FILE", help="a YAML file with a distill: section (default: its defaults)")
    add_overrides(parser, "distill.align.steps=100", "a distill: value")
    used = parser.add_mutually_exclusive_group()  # a run folder that holds anything needs one of them
    used.add_argument("--resume", action="store_true", help="continue the run from its newest usable checkpoint")
    used.add_argument("--overwrite", action="store_true", help="replace the run folder's run (other files stay)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars, no tables")


def run(args: argparse.Namespace) -> int:
    try:
        from ..convert import distill_folder
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    distill_folder(args.converted, args.out, args.config, args.overrides, resume=args.resume, overwrite=args.overwrite,
                   progress=not args.no_progress)
    return 0
