"""What `layerzoo eval` (layerzoo.evaluation.evaluate) may be told: each setting declared once,
with its bounds, for the Python call and the command line (its flags) alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import OptionError
from ..options import Section, option


@dataclass(frozen=True)
class EvalSettings(Section):
    metric: Literal["accuracy", "perplexity", "qa"] | None = option(
        None, help="default: accuracy for training runs of a synthetic task, else perplexity; qa: exact-match "
                   "accuracy on questions about facts placed among --text's held-out passages")
    lengths: tuple[int, ...] | None = option(
        None, min=1, help="context lengths (default: the spec's training.eval.lengths; a distill run's distillation "
                          "length times 1, 2, 4, 8, 16; model folders: the first run's)")
    text: tuple[str, ...] | None = option(
        None, help="perplexity: the text to score every model on (files, globs, stdlib:GLOB), each read with its own "
                   "tokenizer (default: each run's own text; model folders the first run's)")
    field: str | None = option(None, help="with text: the text field of .jsonl records / column of .parquet files")
    holdout: float | None = option(None, above=0.0, max=0.5, help="with text: the fraction of documents held out "
                                                                   "and scored (default 0.05, the text task's)")
    depths: tuple[float, ...] | None = option(None, min=0.0, max=1.0, help="needle depths in [0, 1] (default: the spec's)")
    window: int | None = option(None, min=1, help="test window of the SWA layers (default: the training's "
                                                  "or distillation's long window; a distill run's teacher keeps its own)")
    samples: int | None = option(None, min=1, help="examples per cell (default: training.eval.samples); "
                                                   "perplexity: documents per length (default: training.eval.documents)")
    chunk_size: int = option(1024, min=1, help="perplexity: tokens per piece streamed through the model (default 1024)")
    # training.precision's values (layerzoo.training.precision), declared here: these flags are checked before torch loads
    precision: Literal["auto", "fp32", "bf16"] = option(
        "auto", help="bf16: every model's forward under bf16 autocast (states and losses fp32); auto: bf16 on a GPU "
                     "that supports it, else fp32 (eval runs on the CPU: fp32)")
    out: str | None = option(None, help="folder for the JSON and PNG (default: the first run folder; perplexity: the "
                                        "PNG of all, each run's JSON stays in its folder, a model folder's goes here)")

    def validate(self) -> None:
        if self.text is None and (self.field is not None or self.holdout is not None):
            raise OptionError("text", "needed with field or holdout (they describe its files)")
