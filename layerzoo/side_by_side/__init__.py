"""`layerzoo eval`: what it scores, alone or side by side.

Each argument is one of
  a training run or checkpoint folder   its newest usable checkpoint, on its spec's task
  a distill run folder                  its student (model/) and, beside it, the teacher it was
                                        distilled from (the folder distill-report.json names)
  a Hugging Face model folder           a layerzoo folder (`layerzoo export`, `convert`, a distill
                                        run's model/) or a Llama, Mistral, Qwen2 or Qwen3 folder
                                        `layerzoo convert` reads as a teacher

Perplexity against context length: each model on held-out text read with its own tokenizer
(a training run's task; a distill run's `distill.data` with the teacher's tokenizer; `--text`
for all of them when given, else a model folder reads the first run's text), one JSON each and
one PNG of all, and a table of all with each one's state per sequence at the longest length.
NIAH accuracy: a training run on its own task, alone; distill runs and model folders on NIAH
written in their tokenizer's tokens (tasks.niah.TokenNIAH), a heatmap each and a table of all.

transformers is needed only for model folders and distill runs: a training run is read without it.
"""

from __future__ import annotations

import argparse

from .reading import EvaluationError, read, unique
from .scoring import accuracy, perplexity, run_accuracy

__all__ = ["EvaluationError", "evaluate"]


def evaluate(args: argparse.Namespace) -> int:
    """`layerzoo eval`'s work once its flags are checked."""
    if args.text is None and (args.field is not None or args.holdout is not None):
        raise EvaluationError("--field and --holdout describe the files of --text: give --text FILES too")
    scored = unique([entry for path in args.checkpoint for entry in read(path)])
    metric = args.metric or ("accuracy" if scored[0].kind == "run" and scored[0].task.name != "text" else "perplexity")
    if metric == "perplexity":
        return perplexity(args, scored)
    if all(entry.kind == "run" for entry in scored):
        return run_accuracy(args, scored)
    return accuracy(args, scored)
