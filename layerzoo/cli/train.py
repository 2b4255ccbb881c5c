"""`layerzoo train SPEC`: a spec trained on its `training:` section, then its run reported
(layerzoo.evaluation.train_and_report); under torchrun, data-parallel."""

from __future__ import annotations

import argparse

from .arguments import add_overrides


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="train a spec on its training: section, then evaluate it (torchrun for DDP)")
    parser.add_argument("spec", help="a shipped spec name or a YAML path with a training: section")
    add_overrides(parser, "training.steps=100")
    parser.add_argument("--out", help="run folder (default: training.out_dir, else runs/<spec name>)")
    used = parser.add_mutually_exclusive_group()  # a run folder that holds anything needs one of them
    used.add_argument("--resume", action="store_true", help="continue the run folder's run from its newest usable checkpoint")
    used.add_argument("--overwrite", action="store_true",
                      help="replace the run folder's run (its spec, metrics, checkpoints and reports; other files stay)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile the model (training.compile: true): faster steps after a one-time compile")


def run(args: argparse.Namespace) -> int:
    from ..evaluation.run_report import train_and_report
    from ..training.sweeps.processes import follow_sweep

    follow_sweep()
    overrides = [*args.overrides, *(["training.compile=true"] if args.compile else [])]
    train_and_report(args.spec, overrides, run_dir=args.out, resume=args.resume, overwrite=args.overwrite,
                     progress=not args.no_progress)
    return 0
