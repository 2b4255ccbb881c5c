"""`layerzoo eval` (`evaluate`): models scored alone or side by side.

Each path is one of
  a training run or checkpoint folder   its newest usable checkpoint, on its spec's task
  a distill run folder                  its student (model/) and, beside it, the teacher it was
                                        distilled from (the folder distill-report.json names)
  a Hugging Face model folder           a layerzoo folder (`layerzoo export`, `convert`, a distill
                                        run's model/) or a Llama, Mistral, Qwen2 or Qwen3 folder
                                        `layerzoo convert` reads as a teacher

Perplexity against context length: each model on held-out text read with its own tokenizer
(a training run's task; a distill run's `distill.data` with the teacher's tokenizer; `text`
for all of them when given, else a model folder reads the first run's text), one JSON each and
one PNG of all, and a table of all with each one's state per sequence at the longest length.
NIAH accuracy: a training run on its own task, alone; distill runs and model folders on NIAH
written in their tokenizer's tokens (tasks.niah.TokenNIAH), a heatmap each and a table of all.

transformers is needed only for model folders and distill runs: a training run is read without it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from ..errors import OptionError
from ..options import make_section
from ..mixers.attention import sliding_window_layers
from ..tasks import Task, make_task
from ..tasks.niah import in_tokens
from ..tasks.text import load_tokenizer
from ..training.config import EvalConfig
from ..training.objectives.batches import LOCAL
from ..training.precision import autocast_for, resolved_precision
from ..training.runs.folder import report_stem
from .reading import EvaluationError, Scored, read, unique
from .settings import EvalSettings

def evaluate(paths: Sequence[str | Path], settings: EvalSettings | None = None, *, progress: bool = True,
             **options: Any) -> dict[str, dict]:
    """Score the models `paths` stand for (see above), alone or side by side: print their tables,
    write their JSON and plots, and return each model's result by its label.

    Args:
        paths: training run, checkpoint, distill run or model folders.
        settings: an EvalSettings (None: made of `options`).
        progress: each model's bar of the tokens it runs, and after its first step the time the
            whole will take, on stderr.
        **options: EvalSettings' fields as keyword arguments (`metric="perplexity"`,
            `lengths=[256, 1024]`, ...), each checked against its declaration.

    Returns:
        {label: result}: a perplexity report ("lengths": a row per length) or an accuracy grid
            ("lengths", "depths", "accuracy") per model.

    Raises:
        OptionError: a setting out of its bounds; EvaluationError (and CheckpointError): a path
            that cannot be scored as asked, before any model runs.
    """
    settings = make_section(EvalSettings, options) if settings is None else settings
    scored = unique([entry for path in paths for entry in read(str(path))])
    precision = EvalPrecision.of(settings)
    metric = settings.metric or ("accuracy" if scored[0].kind == "run" and scored[0].task.name != "text"
                                 else "perplexity")
    if metric == "perplexity":
        return perplexity(settings, scored, precision, progress)
    if metric == "accuracy" and all(entry.kind == "run" for entry in scored):
        return run_accuracy(settings, scored, precision, progress)
    return accuracy(settings, scored, precision, progress, qa=metric == "qa")


@dataclass(frozen=True)
class EvalPrecision:
    """What --precision means where eval runs (the CPU: LOCAL): its name ("fp32" or "bf16", which
    each report records) and the context every forward runs in."""

    name: str
    autocast: contextlib.AbstractContextManager

    @classmethod
    def of(cls, settings: EvalSettings) -> EvalPrecision:
        name = resolved_precision(settings.precision, LOCAL.device)
        return cls(name, autocast_for(name, LOCAL.device))


def flag_text(settings: EvalSettings) -> dict[str, Any] | None:
    """The text task's options that text, field and holdout give (None without text)."""
    if settings.text is None:
        return None
    given = {"files": list(settings.text), "field": settings.field, "holdout": settings.holdout}
    return {key: value for key, value in given.items() if value is not None}


def heldout_text(entry: Scored, data: dict[str, Any]) -> Task:
    """The text task of `data` on its held-out split, read with the entry's tokenizer and bound
    to its model's vocabulary; one line naming the entry for a tokenizer larger than the model's
    vocabulary, missing files and the like."""
    try:
        return make_task("text", {**data, "tokenizer": entry.tokenizer, "split": "eval"}, vocab_size(entry.model))
    except OptionError as error:
        raise EvaluationError(f"{entry.source}: {error}") from None


def vocab_size(model: nn.Module) -> int:
    return model.config.vocab_size


def shared_defaults(settings: EvalSettings, scored: list[Scored]) -> tuple[dict | None, list[int] | None, Path | None]:
    """(text options, lengths, report folder) for the entries that bring none: --text, --lengths
    and --out when given, else the first entry's that has one."""
    data = flag_text(settings) or next((entry.data for entry in scored if entry.data is not None), None)
    lengths = settings.lengths or next((entry.lengths for entry in scored if entry.lengths), None)
    out = Path(settings.out) if settings.out else next((entry.folder for entry in scored if entry.folder is not None), None)
    return data, lengths, out


def placement(entry: Scored, settings: EvalSettings, lengths: list[int] | None, out: Path | None,
             kind: str) -> tuple[list[int], int | None, Path]:
    """(lengths, test window, report stem) of one entry: --window for all but a run's teacher, and
    none for a model without SWA layers."""
    lengths = settings.lengths or entry.lengths or lengths
    if not lengths:
        raise EvaluationError(f"{entry.source}: give --lengths (a model folder does not say what length it was "
                              "trained at)")
    window = entry.window if entry.fixed_window or settings.window is None else settings.window
    if entry.kind != "run" and not sliding_window_layers(entry.model):
        window = None  # nothing it runs at: its reports are named for its own (a training run's, for its test window)
    folder = entry.folder or out
    if folder is None:
        raise EvaluationError(f"{entry.source}: give --out, the folder for its report (no run folder among the "
                              "arguments to write it into; a model folder is left as it is)")
    return list(lengths), window, folder / report_stem("-".join(filter(None, (kind, entry.name))), window)


def perplexity(settings: EvalSettings, scored: list[Scored], precision: EvalPrecision, progress: bool) -> dict[str, dict]:
    """Each model's perplexity report (table, JSON), one PNG of all, and with several a table of
    all; returns each model's result by label."""
    from .perplexity_plot import plot_perplexity
    from .text_report import format_comparison, write_perplexity

    data, lengths, out = shared_defaults(settings, scored)
    plan = []
    for entry in scored:  # every input checked before the first model runs, and before any text is tokenized
        if entry.kind == "run" and entry.task.name != "text":
            raise EvaluationError(f"{entry.source}: --metric perplexity needs a run of the text task, not {entry.task.name}")
        where = placement(entry, settings, lengths, out, "perplexity")
        if entry.kind == "run" and settings.text is None:
            task = entry.task
        elif entry.data is None and data is None:
            raise EvaluationError(f"{entry.source}: a model folder brings no text: give --text FILES (read with its "
                                  "own tokenizer), or a distill run beside it, whose distill.data it then reads")
        else:
            task = heldout_text(entry, flag_text(settings) or entry.data or data)
        plan.append((entry, task, *where))
    results = {}
    for entry, task, entry_lengths, window, stem in plan:
        results[entry.label] = write_perplexity(
            entry.model, task, stem, entry_lengths, label=entry.label, spec=getattr(entry.spec, "name", None),
            train_length=entry.train_length, seed=entry.seed, window=window,
            samples=settings.samples or entry.documents, chunk_size=settings.chunk_size, plot=False,
            autocast=precision.autocast, about={"kind": entry.kind, "source": str(entry.source), "files": list(task.files),
                                                "holdout": task.holdout, "precision": precision.name},
            progress=progress)
    out = out or plan[0][4].parent
    out.mkdir(parents=True, exist_ok=True)
    windows = {window for entry, _, _, window, _ in plan if not entry.fixed_window} or {None}  # a teacher's are its own
    png = out / (f"{report_stem('perplexity', windows.pop())}.png" if len(windows) == 1 else "perplexity-windows.png")
    plot_perplexity(results, png, title="perplexity against context length, held-out text")
    if len(results) > 1:
        print("perplexity over the first L tokens of held-out text, each model beside the others (state: the floats "
              "a sequence's state holds at the longest length):")
        print(format_comparison(results))
    print(f"wrote {png}")
    return results


def run_accuracy(settings: EvalSettings, scored: list[Scored], precision: EvalPrecision, progress: bool) -> dict[str, dict]:
    """A training run's length x depth grid on its own task (one run at a time), by its label."""
    from .grid_report import grid_report

    if len(scored) > 1:
        raise EvaluationError("--metric accuracy evaluates one training run at a time")
    entry = scored[0]
    return {entry.label: grid_report(entry.model, entry.spec, entry.task, Path(settings.out) if settings.out else entry.folder,
                                     lengths=settings.lengths, depths=settings.depths, window=settings.window,
                                     samples=settings.samples, autocast=precision.autocast,
                                     about={"precision": precision.name}, progress=progress)}


def accuracy(settings: EvalSettings, scored: list[Scored], precision: EvalPrecision, progress: bool,
             qa: bool = False) -> dict[str, dict]:
    """Distill runs and model folders on NIAH in their tokenizer's tokens, or with `qa` any model
    that reads text on the qa task over --text's passages (else the first run's text): each
    model's grid (table, JSON, heatmap), and with several a table of all (mean over depths by
    length); returns each model's grid by label."""
    from .grid_report import write_grid

    for entry in scored:
        if entry.kind == "run" and not qa:
            raise EvaluationError(f"{entry.source}: --metric accuracy scores a training run on its own task, alone; "
                                  "give it by itself (distill runs and model folders are scored on NIAH together)")
    data, lengths, out = shared_defaults(settings, scored)
    plan = []
    for entry in scored:  # every input checked before the first model runs
        task = qa_task(entry, data) if qa else niah(entry)
        entry_lengths, window, stem = placement(entry, settings, lengths, out, "qa" if qa else "eval")
        plan.append((entry, task, fitting(entry, entry_lengths, task, given=bool(settings.lengths)),
                     window, stem))
    depths = list(settings.depths or EvalConfig().depths)
    grids = {}
    for entry, task, entry_lengths, window, stem in plan:
        grids[entry.label] = write_grid(entry.model, task, stem, entry_lengths, depths, settings.samples or entry.samples,
                                        label=entry.label, train_length=entry.train_length, seed=entry.seed,
                                        window=window, batch_size=entry.batch_size, autocast=precision.autocast,
                                        about={"kind": entry.kind, "source": str(entry.source),
                                               "tokenizer": entry.tokenizer, "precision": precision.name},
                                        progress=progress)
    if len(grids) > 1:
        what = "QA exact-match accuracy (%)" if qa else "NIAH accuracy (%) in each model's tokens"
        print(f"{what}, mean over depths, each model beside the others:")
        print(format_accuracies(grids))
    return grids


def fitting(entry: Scored, lengths: list[int], task: Task, given: bool) -> list[int]:
    """The lengths the task's examples fit in: all of them when given by --lengths (else a
    one-line error), those of the defaults that fit."""
    shortest = task.min_seq_len()
    if given and min(lengths) < shortest:
        raise EvaluationError(f"--lengths: an example of {task.name} needs >= {shortest} tokens, got {min(lengths)}")
    kept = [length for length in lengths if length >= shortest]
    if not kept:
        raise EvaluationError(f"{entry.source}: give --lengths >= {shortest} (an example of {task.name} fits in none "
                              "of its default lengths)")
    return kept


def niah(entry: Scored) -> Task:
    """NIAH (the task's default options) written in the entry's tokenizer's ordinary tokens."""
    try:
        tokenizer = load_tokenizer(entry.tokenizer)
        size = vocab_size(entry.model)
        if tokenizer.vocab_size > size:
            raise OptionError("tokenizer", f"{entry.tokenizer} has {tokenizer.vocab_size} tokens, more than the "
                                           f"model's vocab_size {size}")
        ordinary = np.flatnonzero(tokenizer.token_bytes > 0)
        return in_tokens(ordinary[ordinary != tokenizer.eos_id].tolist())
    except OptionError as error:
        raise EvaluationError(f"{entry.source}: {error}") from None


def qa_task(entry: Scored, data: dict[str, Any] | None) -> Task:
    """The qa task on the held-out passages of `data` (the text options --text gives or a run
    brings), read with the entry's tokenizer."""
    if entry.tokenizer is None or data is None:
        raise EvaluationError(f"{entry.source}: --metric qa needs text for its passages (--text) and a model "
                              "that reads text")
    try:
        return make_task("qa", {**data, "tokenizer": entry.tokenizer, "split": "eval"}, vocab_size(entry.model))
    except OptionError as error:
        raise EvaluationError(f"{entry.source}: {error}") from None


def format_accuracies(grids: dict[str, dict]) -> str:
    """A row per model: its accuracy (%) at each context length, the mean over depths."""
    lengths = sorted({length for grid in grids.values() for length in grid["lengths"]})
    head = ("model", *map(str, lengths))
    rows = []
    for label, grid in grids.items():
        means = {length: sum(column) / len(column) for length, column in zip(grid["lengths"], zip(*grid["accuracy"]))}
        rows.append((label, *("-" if length not in means else f"{100 * means[length]:.1f}" for length in lengths)))
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(width) if i == 0 else cell.rjust(width) for i, (cell, width)
                               in enumerate(zip(row, widths))).rstrip() for row in [head, *rows])
