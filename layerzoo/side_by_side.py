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
import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from torch import nn

from .errors import LayerzooError, OptionError
from .mixers.attention import sliding_window_layers
from .tasks import Task, make_task
from .tasks.niah import in_tokens
from .tasks.text import load_tokenizer
from .training.config import EvalConfig
from .training.distill.run import MODEL_FOLDER
from .training.runs.checkpoint import CheckpointError
from .training.runs.folder import report_stem
from .training.runs.run_checkpoints import latest_checkpoint

DOCUMENT_SEED = 2  # the documents (and NIAH examples) a training run of seed 0 scores: training.seed + 2
LENGTH_FACTORS = (1, 2, 4, 8, 16)  # a distill run's default lengths: its distillation length times these
TEXT_KEYS = ("files", "field", "holdout", "split_seed", "pack")  # the text task's options a run brings along


class EvaluationError(LayerzooError):
    """An argument of `layerzoo eval` that cannot be scored as given; one line."""


@dataclass
class Scored:
    """One model `layerzoo eval` scores. label: its row and line; source: the folder it was read
    from; kind: run (training), student, teacher (a distill run's) or model (a model folder);
    task: a training run's own task; tokenizer: what its text is read with; data: the text
    task's options it brings (TEXT_KEYS), None for a model folder; lengths, train_length,
    window: its defaults (None: unknown, as saved); fixed_window: evaluated at its own windows
    whatever --window says (a run's teacher, the reference); folder: where its reports go
    (None: --out); name: its reports' infix (perplexity[-name]-window<W>); seed: of the
    documents and examples; documents (per length), samples (per NIAH cell), batch_size (NIAH
    examples per forward): unless the flags say; spec: a training run's Spec."""

    label: str
    model: nn.Module
    source: Path
    kind: str
    task: Task | None = None
    tokenizer: str | None = None
    data: dict[str, Any] | None = None
    lengths: list[int] | None = None
    train_length: int | None = None
    window: int | None = None
    fixed_window: bool = False
    folder: Path | None = None
    name: str = ""
    seed: int = DOCUMENT_SEED
    documents: int = EvalConfig().documents
    spec: Any = None
    samples: int = EvalConfig().samples
    batch_size: int = EvalConfig().batch_size


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


def read(path: str) -> list[Scored]:
    """What an argument stands for: [the run], [teacher, student] of a distill run, [the model]."""
    folder = Path(path)
    if latest_checkpoint(folder) is not None or not folder.is_dir():
        return [training_run(path)]
    if is_distill_run(folder):
        return distill_run(folder)
    if (folder / "config.json").is_file():
        return [model_folder(folder)]
    raise CheckpointError(f"{path}: no checkpoint there, and not a distill run or a model folder (expected "
                          "checkpoints/step-* or trainer.json, a distill run's spec.yaml with a distill: section, "
                          "or a model folder's config.json)")


def unique(scored: list[Scored]) -> list[Scored]:
    """Each model once (a teacher that two runs share, a folder that is also a run's teacher or
    student: the first), each label once (a repeated one becomes the folder's path)."""
    seen, labels, kept = set(), set(), []
    for entry in scored:
        key = (entry.kind == "run", entry.source.resolve())
        if key in seen:
            continue
        seen.add(key)
        if entry.label in labels:
            entry.label = f"{entry.source} ({entry.kind})" if entry.kind in ("teacher", "student") else str(entry.source)
        labels.add(entry.label)
        kept.append(entry)
    return kept


def training_run(path: str) -> Scored:
    """A training run's newest usable checkpoint: its model, on its spec's task (held-out split)."""
    checkpoint, model, task = load_run(path)
    spec = checkpoint.spec
    run_dir = checkpoint.directory.parent.parent
    text = task.name == "text"
    config = spec.training
    kept = run_dir / "tokenizer"  # what its text was read with (a bpe:N trained for it, a folder's files)
    tokenizer = str(kept) if (kept / "tokenizer.json").is_file() else task.tokenizer if text else None
    return Scored(run_dir.name, model, run_dir, "run", task=task, tokenizer=tokenizer,
                  data={key: getattr(task, key) for key in TEXT_KEYS} if text else None,
                  lengths=list(config.eval.lengths or [config.seq_len]), train_length=config.seq_len,
                  window=config.test_window, folder=run_dir, seed=config.seed + 2, documents=config.eval.documents,
                  spec=spec, samples=config.eval.samples, batch_size=config.eval.batch_size)


def load_run(path: str):
    """(checkpoint, model with its weights, the spec's task on its held-out split) of a checkpoint
    or run folder (its newest usable checkpoint)."""
    from .assemblies import build
    from .training.runs.checkpoint import load_weights, read_checkpoint
    from .training.runs.run_checkpoints import load_newest

    def load(folder):
        checkpoint = read_checkpoint(folder, training_state=False)
        model = build(checkpoint.spec)
        load_weights(checkpoint, model)
        return checkpoint, model

    checkpoint, model = load_newest(path, load)
    spec = checkpoint.spec
    if spec.training is None:
        raise CheckpointError(f"{checkpoint.directory}: its spec has no training: section naming a task")
    task = make_task(spec.training.task.name, spec.training.task.options, spec.model.vocab_size)
    if hasattr(task, "split"):
        task = dataclasses.replace(task, split="eval")  # held-out text
    return checkpoint, model, task


def is_distill_run(folder: Path) -> bool:
    """Whether the folder holds a spec.yaml with a distill: section (what `layerzoo distill` writes)."""
    try:
        data = yaml.safe_load((folder / "spec.yaml").read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and "distill" in data


def distill_run(folder: Path) -> list[Scored]:
    """[the teacher, the student] of a finished distill run: the student in model/, the teacher
    from the folder distill-report.json names, both on the run's text (distill.data) read with
    the teacher's tokenizer, at the distillation length times LENGTH_FACTORS; the student at the
    run's long window (its held-out measures'), the teacher at its own."""
    from .specs import load_spec

    spec = load_spec(folder / "spec.yaml")
    config = spec.sections["distill"]
    report_file = folder / "distill-report.json"
    if not (folder / MODEL_FOLDER / "config.json").is_file() or not report_file.is_file():
        raise EvaluationError(f"{folder}: the distill run has not finished (no {MODEL_FOLDER}/ or distill-report.json "
                              "yet); `layerzoo distill ... --resume` finishes it")
    try:
        teacher_dir = Path(json.loads(report_file.read_text())["teacher"])
    except (ValueError, KeyError, TypeError) as error:
        raise EvaluationError(f"{report_file}: names no teacher folder ({error!r})") from None
    if not (teacher_dir / "config.json").is_file():
        raise EvaluationError(f"{report_file}: the teacher's folder {teacher_dir} is missing (restore it there, or "
                              "point distill-report.json's teacher at it)")
    length = config.stages()[-1][1].seq_len
    lengths = [length * factor for factor in LENGTH_FACTORS]
    student = Scored(f"{folder.name} (student)", load_model_folder(folder / MODEL_FOLDER), folder / MODEL_FOLDER,
                     "student", tokenizer=str(folder / "tokenizer"), data=dict(config.data), lengths=lengths,
                     train_length=length, window=config.window.long, folder=folder)
    teacher = Scored(f"{teacher_dir.name} (teacher)", load_model_folder(teacher_dir), teacher_dir, "teacher",
                     tokenizer=str(teacher_dir), data=dict(config.data), lengths=lengths, fixed_window=True,
                     folder=folder, name="teacher")
    return [teacher, student]


def model_folder(folder: Path) -> Scored:
    """A model folder, read with its own tokenizer; its text, lengths and report folder come from
    the flags or the runs beside it."""
    return Scored(folder.name, load_model_folder(folder), folder, "model", tokenizer=str(folder), name=folder.name)


def load_model_folder(folder: Path) -> nn.Module:
    """The CausalLM of a model folder, in fp32 and eval mode: a layerzoo folder through
    LayerzooForCausalLM (any mixers), any other through the teacher loader of `layerzoo convert`
    (Llama, Mistral, Qwen2, Qwen3: config.json and safetensors, its code never run)."""
    try:
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    except (ValueError, UnicodeDecodeError, AttributeError) as error:
        raise EvaluationError(f"{folder / 'config.json'}: not a JSON object ({error})") from None
    try:
        if model_type == "layerzoo":
            from .hf.quiet import no_transformers_bars
            from .hf import LayerzooForCausalLM

            with no_transformers_bars():  # eval prints its own lines only
                return LayerzooForCausalLM.from_pretrained(folder).model.float().eval()
        from .convert.conversion import read_teacher_folder
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise EvaluationError(f"{folder}: reading a model folder needs transformers ({error})") from None
    return read_teacher_folder(folder)[2].float().eval()


def flag_text(args: argparse.Namespace) -> dict[str, Any] | None:
    """The text task's options --text, --field and --holdout give (None without --text)."""
    if args.text is None:
        return None
    given = {"files": list(args.text), "field": args.field, "holdout": args.holdout}
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


def shared_defaults(args: argparse.Namespace, scored: list[Scored]) -> tuple[dict | None, list[int] | None, Path | None]:
    """(text options, lengths, report folder) for the entries that bring none: --text, --lengths
    and --out when given, else the first entry's that has one."""
    data = flag_text(args) or next((entry.data for entry in scored if entry.data is not None), None)
    lengths = args.lengths or next((entry.lengths for entry in scored if entry.lengths), None)
    out = Path(args.out) if args.out else next((entry.folder for entry in scored if entry.folder is not None), None)
    return data, lengths, out


def settings(entry: Scored, args: argparse.Namespace, lengths: list[int] | None, out: Path | None,
             kind: str) -> tuple[list[int], int | None, Path]:
    """(lengths, test window, report stem) of one entry: --window for all but a run's teacher, and
    none for a model without SWA layers."""
    lengths = args.lengths or entry.lengths or lengths
    if not lengths:
        raise EvaluationError(f"{entry.source}: give --lengths (a model folder does not say what length it was "
                              "trained at)")
    window = entry.window if entry.fixed_window or args.window is None else args.window
    if entry.kind != "run" and not sliding_window_layers(entry.model):
        window = None  # nothing it runs at: its reports are named for its own (a training run's, for its test window)
    folder = entry.folder or out
    if folder is None:
        raise EvaluationError(f"{entry.source}: give --out, the folder for its report (no run folder among the "
                              "arguments to write it into; a model folder is left as it is)")
    return list(lengths), window, folder / report_stem("-".join(filter(None, (kind, entry.name))), window)


def perplexity(args: argparse.Namespace, scored: list[Scored]) -> int:
    """Each model's perplexity report (table, JSON), one PNG of all, and with several a table of all."""
    from .training.reports.perplexity_plot import plot_perplexity
    from .training.reports.text_report import format_comparison, write_perplexity

    data, lengths, out = shared_defaults(args, scored)
    plan = []
    for entry in scored:  # every input checked before the first model runs, and before any text is tokenized
        if entry.kind == "run" and entry.task.name != "text":
            raise EvaluationError(f"{entry.source}: --metric perplexity needs a run of the text task, not {entry.task.name}")
        where = settings(entry, args, lengths, out, "perplexity")
        if entry.kind == "run" and args.text is None:
            task = entry.task
        elif entry.data is None and data is None:
            raise EvaluationError(f"{entry.source}: a model folder brings no text: give --text FILES (read with its "
                                  "own tokenizer), or a distill run beside it, whose distill.data it then reads")
        else:
            task = heldout_text(entry, flag_text(args) or entry.data or data)
        plan.append((entry, task, *where))
    results = {}
    for entry, task, entry_lengths, window, stem in plan:
        results[entry.label] = write_perplexity(
            entry.model, task, stem, entry_lengths, label=entry.label, spec=getattr(entry.spec, "name", None),
            train_length=entry.train_length, seed=entry.seed, window=window,
            samples=args.samples or entry.documents, chunk_size=args.chunk_size, plot=False,
            about={"kind": entry.kind, "source": str(entry.source), "files": list(task.files), "holdout": task.holdout})
    out = out or plan[0][4].parent
    out.mkdir(parents=True, exist_ok=True)
    windows = {window for entry, _, _, window, _ in plan if not entry.fixed_window} or {None}  # a teacher's are its own
    png = out / (f"{report_stem('perplexity', windows.pop())}.png" if len(windows) == 1 else "perplexity-windows.png")
    plot_perplexity(results, png, title="perplexity against context length, held-out text")
    if len(results) > 1:
        print("perplexity over the first L tokens of held-out text, each model beside the others (state: elements "
              "per sequence at the longest length):")
        print(format_comparison(results))
    print(f"wrote {png}")
    return 0


def run_accuracy(args: argparse.Namespace, scored: list[Scored]) -> int:
    """A training run's length x depth grid on its own task (one run at a time)."""
    from .training.reports.report import grid_report

    if len(scored) > 1:
        raise EvaluationError("--metric accuracy evaluates one training run at a time")
    entry = scored[0]
    grid_report(entry.model, entry.spec, entry.task, Path(args.out) if args.out else entry.folder,
                lengths=args.lengths, depths=args.depths, window=args.window, samples=args.samples)
    return 0


def accuracy(args: argparse.Namespace, scored: list[Scored]) -> int:
    """Distill runs and model folders: each model's NIAH grid in its tokenizer's tokens (table,
    JSON, heatmap), and with several a table of all (mean over depths by length)."""
    from .training.reports.report import write_grid

    for entry in scored:
        if entry.kind == "run":
            raise EvaluationError(f"{entry.source}: --metric accuracy scores a training run on its own task, alone; "
                                  "give it by itself (distill runs and model folders are scored on NIAH together)")
    _, lengths, out = shared_defaults(args, scored)
    plan = []
    for entry in scored:  # every input checked before the first model runs
        task = niah(entry)
        entry_lengths, window, stem = settings(entry, args, lengths, out, "eval")
        plan.append((entry, task, fitting(entry, entry_lengths, task.min_seq_len(), given=bool(args.lengths)),
                     window, stem))
    depths = list(args.depths or EvalConfig().depths)
    grids = {}
    for entry, task, entry_lengths, window, stem in plan:
        grids[entry.label] = write_grid(entry.model, task, stem, entry_lengths, depths, args.samples or entry.samples,
                                        label=entry.label, train_length=entry.train_length, seed=entry.seed,
                                        window=window, batch_size=entry.batch_size,
                                        about={"kind": entry.kind, "source": str(entry.source),
                                               "tokenizer": entry.tokenizer})
    if len(grids) > 1:
        print("NIAH accuracy (%) in each model's tokens, mean over depths, each model beside the others:")
        print(format_accuracies(grids))
    return 0


def fitting(entry: Scored, lengths: list[int], shortest: int, given: bool) -> list[int]:
    """The lengths NIAH's examples fit in (>= shortest): all of them when given by --lengths (else
    a one-line error), those of the defaults that fit."""
    if given and min(lengths) < shortest:
        raise EvaluationError(f"--lengths: NIAH's needles, distractors and query need >= {shortest} tokens, "
                              f"got {min(lengths)}")
    kept = [length for length in lengths if length >= shortest]
    if not kept:
        raise EvaluationError(f"{entry.source}: give --lengths >= {shortest} (NIAH's needles, distractors and query "
                              "fit in none of its default lengths)")
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
