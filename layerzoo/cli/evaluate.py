"""`layerzoo eval RUN_OR_MODEL...`: runs and model folders scored alone or side by side
(layerzoo.evaluation.evaluate; its settings, EvalSettings, are this command's flags)."""

from __future__ import annotations

import argparse

from ..evaluation.settings import EvalSettings
from .arguments import add_section_flags, section_of


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="length x depth accuracy of a checkpoint (table, JSON, heatmap PNG), or its "
                                            "perplexity against context length on held-out text; a distill run's "
                                            "student beside its teacher; model folders side by side")
    parser.add_argument("checkpoint", nargs="+", metavar="RUN_OR_MODEL",
                        help="a checkpoint folder, a run folder (its latest checkpoint), a distill run folder (its "
                             "student and its teacher) or a model folder (layerzoo's, or a Llama, Mistral or Qwen one "
                             "`layerzoo convert` reads, or a GGUF file of one: MODEL.gguf); several are drawn on one plot")
    add_section_flags(parser, EvalSettings)
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or time estimates (stderr)")


def run(args: argparse.Namespace) -> int:
    settings = section_of(EvalSettings, args)  # checked before torch is imported
    from ..evaluation import evaluate

    evaluate(args.checkpoint, settings, progress=not args.no_progress)
    return 0
