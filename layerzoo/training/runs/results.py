"""What a run folder says about its run, for comparisons: the headline metric against context
length (the accuracy grid's mean over needle depths, or perplexity) or the training loss against
the step, the final training and validation loss, tokens per second, and the state size.

Everything is read from the files training and `layerzoo eval` wrote; nothing is evaluated again.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ...assemblies import build
from ...mixers import set_window
from ...specs import Spec, load_spec
from ..errors import ComparisonError
from .folder import report_stem
from .metrics import read_records

METRICS = ("niah", "perplexity", "loss")
FP32_BYTES = 4  # states are fp32: recurrent ones always, KV caches of the fp32 models training writes


@dataclass(frozen=True)
class Curve:
    """A metric at each x (context length, or step for the loss); y None where nothing was scored."""

    x: list[int]
    y: list[float | None]
    train_length: int | None = None


@dataclass(frozen=True)
class RunResults:
    folder: Path
    spec: Spec
    records: list[dict]

    @classmethod
    def read(cls, folder: str | Path) -> RunResults:
        """A run folder's spec.yaml and metrics.jsonl; a ComparisonError for a folder that is not a run."""
        folder = Path(folder)
        if not (folder / "spec.yaml").is_file():
            raise ComparisonError(f"{folder}: not a run folder (no spec.yaml) nor a sweep (no sweep.json)")
        spec = load_spec(folder / "spec.yaml")
        if spec.training is None:
            raise ComparisonError(f"{folder}/spec.yaml: no training: section; not a training run")
        return cls(folder, spec, read_records(folder / "metrics.jsonl"))

    def last(self, key: str) -> float | None:
        """The newest logged value of a metric (loss, eval_loss, tokens_per_s), or None."""
        return next((record[key] for record in reversed(self.records) if record.get(key) is not None), None)

    def test_window(self, window: int | None) -> int | None:
        """The window whose reports to read: `window`, else the one the run's final reports used."""
        return window or self.spec.training.test_window

    def curve(self, metric: str, window: int | None = None) -> Curve:
        """`metric` against context length (niah, perplexity) or step (loss), from the run's files;
        a ComparisonError naming what is missing and the command that writes it."""
        if metric == "loss":
            points = [(record["step"], record["loss"]) for record in self.records if "loss" in record]
            if not points:
                raise ComparisonError(f"{self.folder}: no training loss in metrics.jsonl")
            steps, losses = zip(*points)
            return Curve(list(steps), list(losses))
        task = self.spec.training.task.name
        if metric == "perplexity" and task != "text":
            raise ComparisonError(f"{self.folder}: a run of the {task} task has no perplexity (text runs have); "
                                  "compare it with --metric niah or loss")
        window = self.test_window(window)
        path = self.folder / f"{report_stem('eval' if metric == 'niah' else 'perplexity', window)}.json"
        if not path.is_file():
            flags = "" if metric == "niah" else " --metric perplexity --lengths ..."
            flags += f" --window {window}" if window else ""
            raise ComparisonError(f"{self.folder}: no {metric} results at test window {window or 'as in spec'} "
                                  f"({path.name}); `layerzoo eval {self.folder}{flags}` writes them")
        report = json.loads(path.read_text())
        if metric == "niah":  # each length's accuracy: the mean over needle depths, as the report's table
            depth_means = [sum(column) / len(column) for column in zip(*report["accuracy"])]
            return Curve(report["lengths"], depth_means, report.get("train_length"))
        rows = report["lengths"]
        return Curve([row["length"] for row in rows], [row["perplexity"] for row in rows], report.get("train_length"))

    def default_metric(self) -> str:
        """What `compare` shows when not told, as `eval` does: perplexity for a text run, else the accuracy grid."""
        return "perplexity" if self.spec.training.task.name == "text" else "niah"

    def state_size(self, length: int, window: int | None) -> int | None:
        """State elements per sequence after `length` tokens with the SWA layers at `window` (None:
        the spec's): the model's state_size, built on the meta device, so nothing is allocated.
        None for a model without one (a Hugging Face base)."""
        if self.spec.model is None:
            return None
        model = build(self.spec, device="meta")
        if window is not None:
            set_window(model, window)
        return model.state_size(length) if hasattr(model, "state_size") else None
