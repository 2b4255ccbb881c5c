"""A distillation run: a conversion's student distilled from its teacher, stage by stage, in a run
folder, then measured by the reliance measure.

    RUN_DIR/
      spec.yaml             the student's model: section and the distill: section
      tokenizer/            the teacher's tokenizer files (what the text was read with)
      align/                stage 1: metrics.jsonl, checkpoints/step-N/ (a training run's files)
      end_to_end/           stage 2: likewise
      loss-align.png, loss-end_to_end.png
      reliance.json         the final student's reliance measure
      distill-report.json   tokens of distillation per stage, each stage's final held-out measures, the reliance measure

A run folder that holds anything needs resume (continue from the newest usable checkpoint of the
latest stage that has one: mid-stage, or between stages) or overwrite (remove that run's files).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...errors import OptionError
from ...mixers import set_window
from ...specs import Spec
from ...tasks import Task, example_seed, heldout_seed, make_task
from ..errors import TrainingError
from ..loop.loop import LoopSettings, run_loop
from ..loop.schedules import WindowSchedule
from ..objectives.alignment import exact_layers
from ..objectives.batches import LOCAL
from ..objectives.distillation import Alignment, DistillationStage, EndToEnd, rank_examples
from ..parallel import distributed
from ..parallel.context import ContextGroup
from ..parallel.context.group import check_context_size
from ..precision import autocast_for, resolved_precision
from ..runs.checkpoint import load_weights
from ..runs.folder import check_run_folder, run_bytes, start_run_folder
from ..runs.lock import hold
from ..runs.loss_plot import plot_runs
from ..runs.metrics import read_records
from ..runs.resume import read_for_resume
from ..runs.run_checkpoints import newest_usable, run_checkpoints
from ..runs.space import check_room, trained_only_bytes
from .config import RESUME_MAY_CHANGE, AlignConfig, DistillConfig, EndToEndConfig
from .lora import lora_targets, merged, require_peft, with_lora
from .reliance import reliance_report

LOSS_LABELS = {"align": "mean squared error, mean over converted layers",
               "end_to_end": "KL to the teacher (+ ce_weight x CE), nats per token"}
MODEL_FOLDER = "model"  # where `layerzoo distill` writes the final student as a transformers folder
DISTILL_FILES = ("spec.yaml", "tokenizer", "tokenizer.partial-*", "align", "end_to_end", "loss-*.png", "reliance.json",
                 "distill-report.json", MODEL_FOLDER, f"{MODEL_FOLDER}.partial-*",
                 "perplexity-*.json", "perplexity-*.png", "eval-*.json", "eval-*.png")  # the last: `layerzoo eval RUN_DIR`'s


@dataclass
class DistillResult:
    run_dir: Path
    student: nn.Module  # the final student: a plain CausalLM (LoRA merged), SWA layers at the long window
    spec: Spec
    task: Task  # the text on its held-out split
    report: dict[str, Any] | None  # what distill-report.json holds (None on ranks other than 0, which write nothing)
    context: distributed.Context  # this process's rank under torchrun (leave its group with distributed.teardown)


def distill(conversion: Any, spec: Spec, run_dir: str | Path, *, resume: bool = False, overwrite: bool = False,
            progress: bool = True, device: torch.device | str | None = None,
            holding: contextlib.ExitStack | None = None) -> DistillResult:
    """Distil conversion.student from conversion.teacher as spec's `distill:` section says, in run_dir.

    conversion: a layerzoo.convert.Conversion, or any object with its fields: `teacher` and
    `student`, CausalLMs of one width, depth and vocabulary; `converted`, the indices of the
    student's layers that hold new mixers (every other tensor is the teacher's); `source`, the
    teacher as named (distill-report.json names it); `tokenizer_folder`, the folder of the
    teacher's tokenizer, which reads the text. spec: the student's model section and the distill section (config.distillation_spec). The
    student is trained in place; the teacher is frozen and left as it is. device None: CUDA when
    there is a GPU, else the CPU. The folder is locked while the run writes it (FolderInUse for a
    second run into it); `holding` keeps it locked until that stack closes (the final export).

    Under torchrun, every process calls it with the same conversion: the ranks split each step's
    batch (in groups of distill.context ranks that share each sequence, a piece each), each on its
    own device, and step as one process does; rank 0 alone writes the folder.
    """
    if resume and overwrite:
        raise TrainingError("resume and overwrite exclude each other: continue the run, or replace it")
    config: DistillConfig | None = spec.sections.get("distill")
    if config is None:
        raise TrainingError(f"spec {spec.name or spec.source} has no distill: section")
    teacher, student, converted = conversion.teacher, conversion.student, tuple(conversion.converted)
    check_pair(teacher, student, converted, spec)
    if config.end_to_end is not None and config.end_to_end.lora is not None:
        require_peft()  # before anything runs: not after stage 1's hours
    context = run_context(device)
    check_context_size(config.context, context.world_size)
    for name, settings in config.stages():  # a batch that does not split fails before anything is written
        rank_examples(name, settings.batch_size, context, config.context)
    progress = progress and context.is_main  # one rank reports
    if config.window.long is not None:  # stage 1, and the student saved, at the long window
        set_window(student, config.window.long)
    aligned = aligned_layers(teacher, student, converted, config, echo=print if progress else None)
    task = text_task(config, conversion.tokenizer_folder, spec.model.vocab_size)
    run_dir = Path(run_dir)
    device = context.device
    precision = resolved_precision(config.precision, device)
    autocast = autocast_for(precision, device)
    with contextlib.ExitStack() as held:
        if context.is_main:  # the rank that writes the folder holds it for all
            (held if holding is None else holding).enter_context(hold(run_dir, "layerzoo distill"))
        check_run_folder(run_dir, resume, overwrite, DISTILL_FILES)  # on every rank, before any rank writes
        distributed.barrier(context)
        group = ContextGroup.from_world(config.context, config.balance_attention) if config.context > 1 else None
        stages = config.stages()
        first = resume_stage(run_dir, [name for name, _ in stages]) if resume else 0
        task.prepare(progress=progress)
        eval_task = dataclasses.replace(task, split="eval")
        teacher.to(device).eval().requires_grad_(False)
        own_copies(student, teacher)
        student.to(device)
        needed = max((stage_checkpoint_bytes(name, settings, student, aligned) for name, settings in stages[first:]),
                     default=0)
        if context.is_main:
            check_room(run_dir, needed - (run_bytes(run_dir, DISTILL_FILES) if overwrite else 0))
            start_run_folder(run_dir, spec, overwrite, task.tokenizer_files(), DISTILL_FILES)
        for name, settings in stages[:first]:  # finished: what each trained, over the conversion's student
            load_finished(run_dir / name, settings.steps, spec, student, report=context.is_main)
        for index, (name, settings) in enumerate(stages[first:], first):
            stage = make_stage(name, settings, teacher, student, aligned, config, task, eval_task, autocast, context,
                               group)
            checkpoint = None
            if resume and index == first:
                checkpoint = newest_usable(run_dir / name, lambda folder: read_for_resume(
                    folder, spec, stage.model, "distill", RESUME_MAY_CHANGE), report=context.is_main)
                load_weights(checkpoint, stage.model, partial=True)
            windows = WindowSchedule(config.window, settings.steps, config.seed) if name == "end_to_end" else None
            run_loop(stage, run_dir / name, spec, stage_settings(name, settings, config), windows=windows,
                     window_model=student, checkpoint=checkpoint, context=context, progress=progress)
            student = merged(stage.model) if stage.model is not student else student
            if context.is_main:
                plot_runs([run_dir / name], run_dir / f"loss-{name}.png", LOSS_LABELS[name])
        student.requires_grad_(True)
        measured = reliance_report(student, eval_task, stages[-1][1].seq_len, run_dir if context.is_main else None,
                                   teacher=teacher, samples=config.eval.reliance_samples or config.eval.samples,
                                   batch_size=config.eval.batch_size, seed=heldout_seed(config.seed),
                                   autocast=autocast, context=context, echo=print if progress else None)
        report = write_report(run_dir, conversion, stages, measured, precision) if context.is_main else None
    if progress:
        tokens = report["tokens"]
        print(f"distilled on {tokens['total']:,} tokens ("
              + ", ".join(f"{name} {tokens[name]:,}" for name, _ in stages) + f"); wrote {run_dir / 'distill-report.json'}")
    return DistillResult(run_dir, student, spec, eval_task, report, context)


def run_context(device: torch.device | str | None) -> distributed.Context:
    """torchrun's process group joined, each rank on its own device; in one process, on `device`
    (None: CUDA when there is a GPU, else the CPU)."""
    context = distributed.setup()
    if context.distributed or device is None:
        return context
    return dataclasses.replace(context, device=torch.device(device))


def check_pair(teacher: nn.Module, student: nn.Module, converted: tuple[int, ...], spec: Spec) -> None:
    """A one-line TrainingError unless the teacher and student are CausalLMs of one width, depth and
    vocabulary, the converted layers in range, and the spec's model the student's."""
    for what in ("d_model", "n_layers", "vocab_size"):
        if getattr(teacher.config, what) != getattr(student.config, what):
            raise TrainingError(f"the teacher's {what} is {getattr(teacher.config, what)}, the student's "
                                f"{getattr(student.config, what)}: not a conversion of it")
    if not converted:
        raise TrainingError("the conversion converted no layer: there is nothing to distil")
    outside = [layer for layer in converted if not 0 <= layer < student.config.n_layers]
    if outside:
        raise TrainingError(f"converted layers {outside} are out of range: the student has {student.config.n_layers}")
    if spec.model != student.config:
        raise TrainingError("the spec's model: section is not the student's; make the spec with distillation_spec")


def aligned_layers(teacher: nn.Module, student: nn.Module, converted: tuple[int, ...], config: DistillConfig,
                   echo: Callable[[str], Any] | None = None) -> tuple[int, ...]:
    """The converted layers stage 1 trains: those that differ from the teacher's attention on its
    sequences (exact ones, an SWA layer whose window covers align.seq_len with the teacher's
    weights, stay frozen: echoed when echo is given). A one-line TrainingError when every layer is
    exact and stage 1 runs."""
    if config.align is None:
        return converted
    exact = exact_layers(teacher, student, converted, config.align.seq_len)
    aligned = tuple(layer for layer in converted if layer not in exact)
    if not aligned:
        raise TrainingError(f"every converted layer ({', '.join(map(str, converted))}) computes the teacher's attention "
                            f"exactly on {config.align.seq_len}-token sequences: stage 1 has nothing to align; set "
                            "distill.align to null")
    if exact and echo is not None:
        which = f"layers {', '.join(map(str, exact))} compute" if len(exact) > 1 else f"layer {exact[0]} computes"
        echo(f"align: {which} the teacher's attention exactly on {config.align.seq_len}-token sequences (a window "
             "that covers them, the teacher's weights): frozen in stage 1")
    return aligned


def text_task(config: DistillConfig, tokenizer: Path, vocab_size: int) -> Task:
    """The text task of distill.data, read with the teacher's tokenizer; a one-line error for files
    that are missing or a tokenizer larger than the model's vocabulary."""
    try:
        return make_task("text", {**config.data, "tokenizer": str(tokenizer)}, vocab_size)
    except OptionError as error:
        where = "the teacher's tokenizer" if error.key == "tokenizer" else f"distill.data.{error.key}"
        raise TrainingError(f"{where}: {error.message}") from None


def own_copies(student: nn.Module, teacher: nn.Module) -> None:
    """Give the student its own copy of any tensor it shares with the teacher (a conversion may
    share them to save memory), so that training the student never changes the teacher."""
    shared = {tensor.data_ptr() for tensor in teacher.state_dict().values()}
    for parameter in student.parameters():
        if parameter.data_ptr() in shared:
            parameter.data = parameter.data.clone()


def resume_stage(run_dir: Path, names: list[str]) -> int:
    """The index of the latest stage whose folder has checkpoints: the one to continue (an earlier
    stage's are complete, since a stage starts only after the one before it saved its last step)."""
    for index in range(len(names) - 1, -1, -1):
        if run_checkpoints(run_dir / names[index]):
            return index
    raise TrainingError(f"{run_dir}: no checkpoint to resume from; start over with --overwrite")


def load_finished(folder: Path, steps: int, spec: Spec, student: nn.Module, report: bool = True) -> None:
    """The parameters a finished stage trained, from its last checkpoint, into the student (the
    student itself: only the last stage wraps it in LoRA adapters); a one-line TrainingError when
    its newest usable checkpoint is not its last step. report: unusable checkpoints reported."""
    checkpoint = newest_usable(folder, lambda path: read_for_resume(path, spec, student, "distill", RESUME_MAY_CHANGE),
                               report)
    if checkpoint is None or checkpoint.step != steps:
        newest = "no usable checkpoint" if checkpoint is None else f"step {checkpoint.step} of {steps} as its newest"
        raise TrainingError(f"{folder}: has {newest}, and the stage after it started from its last step; start over "
                            "with --overwrite")
    load_weights(checkpoint, student, partial=True)


def make_stage(name: str, settings: AlignConfig | EndToEndConfig, teacher: nn.Module, student: nn.Module,
               aligned: tuple[int, ...], config: DistillConfig, task: Task, eval_task: Task,
               autocast=contextlib.nullcontext(), context: distributed.Context = LOCAL,
               group: ContextGroup | None = None) -> DistillationStage:
    """The objective of stage `name`: stage 1 trains the `aligned` layers' mixers only; stage 2 the
    whole student, or LoRA adapters (drawn from the run's seed, so a resumed run draws the same
    ones) on its projections. The stage's RNG starts from the run's seed and the stage's name (a
    resumed stage's from its checkpoint), as a training run's from its seed, so that what a run
    draws (dropout) never depends on what the process did before it. Its forwards run in `autocast`,
    on context's device, its batch split over context's ranks and group's pieces (objectives/distillation.py)."""
    torch.manual_seed(example_seed(config.seed, name))
    common = dict(task=task, eval_task=eval_task, seed=config.seed, batch_size=settings.batch_size,
                  heldout_seed=heldout_seed(config.seed), samples=config.eval.samples,
                  eval_batch_size=config.eval.batch_size, autocast=autocast, context=context, group=group)
    if name == "align":
        return Alignment(student, teacher, aligned, settings.seq_len, **common)
    student.requires_grad_(True)
    model = student
    if settings.lora is not None:
        torch.manual_seed(example_seed(config.seed, "lora"))
        model = with_lora(student, settings.lora)
    return EndToEnd(model, teacher, settings.seq_len, settings.temperature, settings.ce_weight, **common)


def stage_checkpoint_bytes(name: str, settings: AlignConfig | EndToEndConfig, student: nn.Module,
                           aligned: tuple[int, ...]) -> int:
    """About what a checkpoint of stage `name` holds: what the stage trains (the aligned layers'
    mixers; the whole student; or LoRA's A (rank, in) and B (out, rank) on each target) and
    AdamW's two moments of it."""
    if name == "align":
        return trained_only_bytes(p for index in aligned for p in student.blocks[index].mixer.parameters())
    if settings.lora is None:
        return trained_only_bytes(student.parameters())
    linears = [student.get_submodule(target) for target in lora_targets(student, settings.lora.modules)]
    return 3 * sum(settings.lora.rank * (linear.in_features + linear.out_features) * linear.weight.element_size()
                   for linear in linears)


def stage_settings(name: str, settings: AlignConfig | EndToEndConfig, config: DistillConfig) -> LoopSettings:
    """The loop's settings of a stage."""
    return LoopSettings(steps=settings.steps, batch_size=settings.batch_size, seq_len=settings.seq_len,
                        optimizer=settings.optimizer, log_every=config.log_every, eval_every=config.eval.every,
                        checkpoint_every=config.checkpoint_every, keep_checkpoints=config.keep_checkpoints,
                        lr_key=f"distill.{name}.optimizer.lr", name=name, checkpoint_trained_only=True)


def write_report(run_dir: Path, conversion: Any, stages: list, measured: dict[str, Any], precision: str
                 ) -> dict[str, Any]:
    """distill-report.json: tokens of distillation per stage (what its steps read), the precision
    the forwards ran at (fp32 or bf16), each stage's last held-out measures (from its
    metrics.jsonl), and the reliance measure."""
    tokens = {name: settings.steps * settings.batch_size * settings.seq_len for name, settings in stages}
    finals = {}
    for name, _ in stages:
        records = read_records(run_dir / name / "metrics.jsonl")
        finals[name] = {key: value for record in records for key, value in record.items() if key.startswith("eval_")}
    report = {"teacher": str(conversion.source), "converted_layers": list(conversion.converted),
              "tokens": {**tokens, "total": sum(tokens.values())}, "precision": precision, "heldout": finals,
              "reliance": measured}
    (run_dir / "distill-report.json").write_text(json.dumps(report, indent=1))
    return report
