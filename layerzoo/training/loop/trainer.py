"""`layerzoo train`: a spec with a `training:` section -> a trained model in a run folder.

The model is trained by the loop (loop.py) on the language-modelling objective, data-parallel
under torchrun: each rank draws its slice of every step's global batch, and the loss is
normalised by the scored tokens of the whole global batch, so N processes step as one does.
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ...assemblies.build import build, vocab_size
from ...specs import Spec, load_spec
from ...tasks import Task, make_task
from ..config import TrainingConfig
from ..errors import TrainingError
from ..objectives.language_model import LanguageModel, examples_per_rank
from ..parallel import distributed
from ..parallel.context.armt import check_trainable
from ..parallel.context.group import check_context_size
from ..parallel.fsdp import build_sharded
from ..precision import autocast_for
from ..runs.checkpoint import load_weights
from ..runs.folder import check_run_folder, default_run_dir, run_bytes, start_run_folder
from ..runs.lock import hold
from ..runs.resume import read_for_resume
from ..runs.run_checkpoints import newest_usable
from ..runs.space import check_room, checkpoint_bytes
from .curriculum import Curriculum
from .loop import LoopSettings, run_loop
from .schedules import WindowSchedule


@dataclasses.dataclass
class RunResult:
    run_dir: Path
    model: nn.Module  # unwrapped, on this rank's device
    spec: Spec
    task: Task
    metrics: dict[str, Any]
    context: distributed.Context


def train(spec: str | Path | Spec, overrides: list[str] = (), *, run_dir: str | Path | None = None,
          resume: bool = False, overwrite: bool = False, progress: bool = True,
          holding: contextlib.ExitStack | None = None) -> RunResult:
    """Train `spec` (a name, path or Spec with a `training:` section) into run_dir.

    run_dir defaults to training.out_dir, else runs/<spec name>; it receives spec.yaml (at the
    start), metrics.jsonl and checkpoints/step-N/. A folder that holds anything needs resume=True
    (continue from its newest usable checkpoint) or overwrite=True (replace the run's files).
    The folder is locked while training, so that a second run into it is refused (FolderInUse);
    `holding` keeps it locked after training, until that stack closes (the CLI's final reports).
    SIGINT or SIGTERM saves a checkpoint after the current step and raises TrainingInterrupted;
    a non-finite loss or gradient raises TrainingError before the weights are updated.
    """
    if resume and overwrite:
        raise TrainingError("resume and overwrite exclude each other: continue the run, or replace it")
    spec = load_spec(spec, overrides)
    config = spec.training
    if config is None:
        raise TrainingError(f"spec {spec.name or spec.source} has no training: section to train with")
    run_dir = Path(run_dir or config.out_dir or default_run_dir(spec))
    with contextlib.ExitStack() as held:
        if distributed.launched_rank() == 0:  # the rank that writes the folder holds it for all
            (held if holding is None else holding).enter_context(hold(run_dir, "layerzoo train"))
        check_run_folder(run_dir, resume, overwrite)  # on every rank, before any rank writes
        return train_in(run_dir, spec, resume, overwrite, progress)


def train_in(run_dir: Path, spec: Spec, resume: bool, overwrite: bool, progress: bool) -> RunResult:
    """train() in a run folder found fit for it."""
    config = spec.training
    context = distributed.setup()
    distributed.barrier(context)
    # an ARMT that cannot run context-parallel, a context or a batch that does not split: all fail before anything is built
    if config.context > 1 and spec.armt is not None:
        check_trainable(spec.armt.truncate_segments)
    check_context_size(config.context, context.world_size)
    examples_per_rank(config, context.world_size // config.context)
    torch.manual_seed(config.seed)  # identical initial weights on every rank
    model = build_model(spec, context)
    task = make_task(config.task.name, config.task.options, vocab_size(spec, model))
    task.prepare(progress=progress and context.is_main)  # a corpus is tokenized once; other ranks wait for it
    eval_task = dataclasses.replace(task, split="eval") if hasattr(task, "split") else task
    checkpoint = None
    if resume:
        checkpoint = newest_usable(run_dir, lambda folder: read_for_resume(folder, spec, model), report=context.is_main)
        if checkpoint is None:
            raise TrainingError(f"{run_dir}: no checkpoint to resume from; start over with --overwrite")
        load_weights(checkpoint, model)
    if config.compile:
        compile_blocks(model)
    if context.is_main:  # room for a checkpoint before anything is written (an overwrite frees the old run's)
        check_room(run_dir, checkpoint_bytes(model) - (run_bytes(run_dir) if overwrite else 0))
        start_run_folder(run_dir, spec, overwrite, task.tokenizer_files())
    # an ARMT rank holding one segment leaves some memory weights unused (rank 0 reads no memory)
    wrapped = distributed.wrap(model, context, config.parallel, find_unused=config.context > 1 and spec.armt is not None)
    objective = LanguageModel(wrapped, task, eval_task, config, context, autocast_context(config, context))
    metrics = run_loop(objective, run_dir, spec, loop_settings(config), windows=WindowSchedule(config.window, config.steps,
                       config.seed), window_model=model, curriculum=make_curriculum(config, model), checkpoint=checkpoint,
                       context=context, progress=progress)
    return RunResult(run_dir, model, spec, eval_task, metrics, context)


def loop_settings(config: TrainingConfig) -> LoopSettings:
    """The loop's settings of a `training:` section."""
    return LoopSettings(steps=config.steps, batch_size=config.batch_size, seq_len=config.seq_len,
                        optimizer=config.optimizer, log_every=config.log_every, eval_every=config.eval.every,
                        checkpoint_every=config.checkpoint_every, keep_checkpoints=config.keep_checkpoints,
                        lr_key="training.optimizer.lr", tensorboard=config.log.tensorboard)


def compile_blocks(model: nn.Module) -> None:
    """torch.compile each of the model's repeated blocks, in place.

    In place, the module, its parameters and its state_dict keys stay what they were, so
    checkpoints, DDP and FSDP see the same model; only the blocks' calls run compiled. Block by
    block rather than whole: a block's graph takes its weights as inputs, so each kind of block
    (and window) compiles once and serves every block of its kind, a fraction of the one-time cost.
    Measures run uncompiled (objectives/batches.py).
    """
    for block in model.repeated_blocks():
        block.compile()


def build_model(spec: Spec, context: distributed.Context) -> nn.Module:
    """The spec's model on this rank's device: FSDP2-sharded under torchrun with parallel fsdp
    (built on the meta device, each rank allocating its shards only), else whole."""
    config = spec.training
    if context.distributed and config.parallel == "fsdp":
        return build_sharded(spec, context.device, config.mixed_precision)
    return build(spec).to(context.device)


def make_curriculum(config: TrainingConfig, segmented: Any) -> Curriculum | None:
    """The spec's segment curriculum (None without one), its segment size the config's or else
    `segmented`'s: the model, or the spec's ARMTConfig where no model is built (None: none to ask)."""
    if config.curriculum is None:
        return None
    length = config.curriculum.segment_size or getattr(segmented, "segment_size", None)
    if not length:
        raise TrainingError("training.curriculum: set segment_size, or train a model that has one (ARMT)")
    return Curriculum(config.curriculum, config.steps, length, config.seed)


def autocast_context(config: TrainingConfig, context: distributed.Context):
    """bf16 autocast at training.precision (precision.py), or none under FSDP's bf16 mixed
    precision, whose bf16 weights already make the compute bf16 (in one process nothing is
    sharded, and precision auto applies as usual)."""
    if context.distributed and config.parallel == "fsdp" and config.mixed_precision is not None:
        return contextlib.nullcontext()
    return autocast_for(config.precision, context.device)
