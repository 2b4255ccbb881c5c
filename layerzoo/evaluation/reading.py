"""What an argument of `layerzoo eval` stands for: a training run's model on its task, a distill
run's student and teacher on its text, a model folder; each read once, as a Scored entry."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from torch import nn

from ..errors import LayerzooError
from ..tasks import Task, make_task, report_seed
from ..training.config import EvalConfig
from ..training.distill.run import MODEL_FOLDER
from ..training.runs.checkpoint import CheckpointError
from ..training.runs.run_checkpoints import latest_checkpoint

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
    seed: int = report_seed(0)
    documents: int = EvalConfig().documents
    spec: Any = None
    samples: int = EvalConfig().samples
    batch_size: int = EvalConfig().batch_size


def read(path: str) -> list[Scored]:
    """What an argument stands for: [the run], [teacher, student] of a distill run, [the model]
    (a model folder, or a GGUF file read as the folder it dequantizes into)."""
    folder = Path(path)
    if folder.suffix.lower() == ".gguf":  # checked before importing layerzoo.hf, which imports transformers
        return [gguf_file(folder)]
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
                  window=config.test_window, folder=run_dir, seed=report_seed(config.seed), documents=config.eval.documents,
                  spec=spec, samples=config.eval.samples, batch_size=config.eval.batch_size)


def load_run(path: str):
    """(checkpoint, model with its weights, the spec's task on its held-out split) of a checkpoint
    or run folder (its newest usable checkpoint)."""
    from ..assemblies.build import build, vocab_size
    from ..training.runs.checkpoint import load_weights, read_checkpoint
    from ..training.runs.run_checkpoints import load_newest

    def load(folder):
        checkpoint = read_checkpoint(folder, training_state=False)
        model = build(checkpoint.spec)
        load_weights(checkpoint, model)
        return checkpoint, model

    checkpoint, model = load_newest(path, load)
    spec = checkpoint.spec
    if spec.training is None:
        raise CheckpointError(f"{checkpoint.directory}: its spec has no training: section naming a task")
    task = make_task(spec.training.task.name, spec.training.task.options, vocab_size(spec, model))
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
    from ..specs import load_spec

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
    label = teacher_dir.name
    if teacher_dir.suffix.lower() == ".gguf" and teacher_dir.is_file():  # a GGUF teacher: read as convert read it
        label, teacher_dir = teacher_dir.stem, dequantized(teacher_dir)
    if not (teacher_dir / "config.json").is_file():
        raise EvaluationError(f"{report_file}: the teacher's folder {teacher_dir} is missing (restore it there, or "
                              "point distill-report.json's teacher at it)")
    length = config.stages()[-1][1].seq_len
    lengths = [length * factor for factor in LENGTH_FACTORS]
    student = Scored(f"{folder.name} (student)", load_model_folder(folder / MODEL_FOLDER), folder / MODEL_FOLDER,
                     "student", tokenizer=str(folder / "tokenizer"), data=dict(config.data), lengths=lengths,
                     train_length=length, window=config.window.long, folder=folder)
    teacher = Scored(f"{label} (teacher)", load_model_folder(teacher_dir), teacher_dir, "teacher",
                     tokenizer=str(teacher_dir), data=dict(config.data), lengths=lengths, fixed_window=True,
                     folder=folder, name="teacher")
    return [teacher, student]


def gguf_file(path: Path) -> Scored:
    """A GGUF file of a family `layerzoo convert` reads, as the model folder it dequantizes into,
    named by the file's stem."""
    return model_folder(dequantized(path), path.stem)


def dequantized(path: Path) -> Path:
    """The model folder a GGUF file of a family `layerzoo convert` reads dequantizes into."""
    try:
        from ..convert.teacher import GGUF_FAMILIES
        from ..hf.gguf import gguf_folder
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise EvaluationError(f"{path}: reading a GGUF file needs transformers and gguf ({error})") from None
    return gguf_folder(path, GGUF_FAMILIES)


def model_folder(folder: Path, label: str | None = None) -> Scored:
    """A model folder, read with its own tokenizer; its text, lengths and report folder come from
    the flags or the runs beside it. label: its row and reports' infix (default: the folder's name)."""
    label = label or folder.name
    return Scored(label, load_model_folder(folder), folder, "model", tokenizer=str(folder), name=label)


def load_model_folder(folder: Path) -> nn.Module:
    """The CausalLM of a model folder, in fp32 and eval mode: a layerzoo folder through
    LayerzooForCausalLM (any mixers), any other through the teacher loader of `layerzoo convert`
    (Llama, Mistral, Qwen2, Qwen3, Gemma-3: config.json and safetensors, its code never run)."""
    try:
        model_type = json.loads((folder / "config.json").read_text()).get("model_type")
    except (ValueError, UnicodeDecodeError, AttributeError) as error:
        raise EvaluationError(f"{folder / 'config.json'}: not a JSON object ({error})") from None
    try:
        if model_type == "layerzoo":
            from ..hf.quiet import no_transformers_bars
            from ..hf import LayerzooForCausalLM

            with no_transformers_bars():  # eval prints its own lines only
                return LayerzooForCausalLM.from_pretrained(folder).model.float().eval()
        from ..convert.conversion import read_teacher_folder
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise EvaluationError(f"{folder}: reading a model folder needs transformers ({error})") from None
    return read_teacher_folder(folder)[2].float().eval()
