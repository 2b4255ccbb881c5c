"""The training loop: a spec with a `training:` section -> a trained model in a run folder.

Everything random is keyed by (seed, step, example index): the examples, the window of a step,
the segment count. A resumed run and an N-process run therefore see exactly what one
uninterrupted process with the same global batch sees; the loss of a step is normalised by the
scored tokens of the whole global batch, so gradients match too. Saving checkpoints and noting
signals draw no random numbers and change no arithmetic.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ...assemblies import build
from ...kernels.common.native_build import reporting_builds
from ...mixers import at_window, set_window
from ...specs import Spec, load_spec
from ...tasks import Batch, Task, example_seed, make_task
from ..config import OptimizerConfig, TrainingConfig
from ..errors import TrainingError
from ..evaluation.evaluate import evaluate, score
from ..parallel import distributed
from ..parallel.fsdp import build_sharded
from ..runs.checkpoint import load_training_state, load_weights, save_checkpoint
from ..runs.folder import check_run_folder, default_run_dir, run_bytes, start_run_folder
from ..runs.lock import hold
from ..runs.metrics import MetricsLog
from ..runs.resume import read_for_resume
from ..runs.run_checkpoints import checkpoint_dir, newest_usable, prune_checkpoints
from ..runs.space import check_room, checkpoint_bytes
from ..runs.tensorboard import TensorBoardLog
from .curriculum import Curriculum
from .interrupt import StopSignals, TrainingInterrupted
from .schedules import WindowSchedule, learning_rate


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
    share = check_batch(config, context.world_size)
    torch.manual_seed(config.seed)  # identical initial weights on every rank
    model = build_model(spec, context)
    task = make_task(config.task.name, config.task.options, spec.model.vocab_size)
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
    wrapped = distributed.wrap(model, context, config.parallel)
    optimizer = make_optimizer(wrapped, config)
    start_step = 0 if checkpoint is None else load_training_state(checkpoint, wrapped, optimizer)["step"]
    del checkpoint  # its tensors are loaded; do not hold a second copy through training
    windows = WindowSchedule(config.window, config.steps, config.seed)
    curriculum = make_curriculum(config, model)
    autocast = autocast_context(config, context)
    mirrors = [TensorBoardLog(run_dir / "tensorboard", start_step + 1)] if config.log.tensorboard and context.is_main else []
    log = MetricsLog(run_dir / "metrics.jsonl" if context.is_main else None, keep_through=start_step, mirrors=mirrors)
    bar = tqdm(total=config.steps, initial=start_step, unit="step", dynamic_ncols=True, mininterval=0.5,
               disable=not (progress and context.is_main))
    started, tokens_seen, metrics, saved = time.perf_counter(), 0, {}, start_step or None
    with bar, StopSignals() as signals, contextlib.ExitStack() as closing:
        for mirror in mirrors:
            closing.callback(mirror.close)  # flushed however the loop ends
        if not bar.disable:
            closing.enter_context(kernel_builds_on(bar))
        for step in range(start_step, config.steps):
            window = windows.window(step)
            if window is not None:
                set_window(model, window)
            seq_len = config.seq_len
            lr_step, lr_total = step, config.steps
            if curriculum is not None:
                seq_len = curriculum.seq_len(step)
                lr_step, lr_total = curriculum.stage_progress(step)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(lr_step, lr_total, config.optimizer)
            batches = step_batches(task, config, step, seq_len, share, context)
            loss, correct, count, grad_norm = train_step(wrapped, optimizer, batches, config, context, autocast)
            if not finite(loss, grad_norm):
                raise TrainingError(diverged(step + 1, loss, grad_norm, saved and checkpoint_dir(run_dir, saved)))
            tokens_seen += config.batch_size * seq_len
            metrics = {"step": step + 1, "loss": loss, "accuracy": correct, "lr": optimizer.param_groups[0]["lr"],
                       "window": window, "seq_len": seq_len, "grad_norm": grad_norm,
                       "tokens_per_s": tokens_seen / (time.perf_counter() - started)}
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", acc=f"{correct:.3f}", tok_s=f"{metrics['tokens_per_s']:.0f}", refresh=False)
            last = step + 1 == config.steps
            if (step + 1) % config.log_every == 0 or last:
                log.write(metrics)
            if (step + 1) % config.eval.every == 0 or last:
                with at_window(model, windows.eval_window):
                    result = evaluate(wrapped, eval_task, config.seq_len, config.eval.samples, config.seed + 1,
                                      batch_size=config.eval.batch_size, context=context, autocast=autocast)
                metrics.update({f"eval_{key}": value for key, value in result.items()})
                log.write({"step": step + 1, **{f"eval_{key}": value for key, value in result.items()}})
                if context.is_main and progress:
                    bar.write(f"step {step + 1}: eval loss {result['loss']:.4f}, accuracy {result['accuracy']:.3f}")
            stop = stop_requested(signals, context)
            if (config.checkpoint_every and (step + 1) % config.checkpoint_every == 0) or last or stop:
                saved = step + 1
                save_checkpoint(checkpoint_dir(run_dir, saved), wrapped, optimizer, spec, saved, metrics,
                                write=context.is_main)
                if context.is_main:
                    prune_checkpoints(run_dir, saved, config.keep_checkpoints)
            if stop:
                raise TrainingInterrupted(f"interrupted by {stop.name} after step {saved}; saved "
                                          f"{checkpoint_dir(run_dir, saved)}; continue with --resume", stop)
    if windows.eval_window is not None:
        set_window(model, windows.eval_window)
    return RunResult(run_dir, model, spec, eval_task, metrics, context)


def kernel_builds_on(bar: tqdm) -> contextlib.AbstractContextManager:
    """A compiled kernel's first-use build (in the first step, or the first evaluation) on the
    progress bar: its notice printed above the bar, and the bar labelled "building kernels" until
    it ends, rather than standing at a silent 0%."""
    def report(notice: str | None) -> None:
        if notice is not None:
            bar.write(notice, file=sys.stderr)
        bar.set_description_str("" if notice is None else "building kernels", refresh=True)

    return reporting_builds(report)


def stop_requested(signals: StopSignals, context: distributed.Context):
    """The signal that asks to stop after this step (SIGTERM when it reached another rank), or None.
    Every rank agrees, so that all of them save the same step and stop."""
    (count,) = distributed.all_sum([float(signals.received is not None)], context, context.device)
    return signals.received or (signal.SIGTERM if count else None)


def finite(*values: float) -> bool:
    return all(math.isfinite(value) for value in values)


def diverged(step: int, loss: float, grad_norm: float, last_checkpoint: Path | None,
             lr_key: str = "training.optimizer.lr") -> str:
    """The one-line error of a step whose loss or gradient is not finite; lr_key: the setting to lower."""
    last = f"the last checkpoint is {last_checkpoint}" if last_checkpoint else "no checkpoint was saved"
    return (f"step {step}: non-finite loss or gradient (loss {loss:.4g}, grad norm {grad_norm:.4g}); stopped before "
            f"updating the weights, {last}; try a lower {lr_key}")


def train_step(model: nn.Module, optimizer: torch.optim.Optimizer, batches: list[Batch], config: TrainingConfig,
               context: distributed.Context, autocast) -> tuple[float, float, float, float]:
    """One optimizer step over this rank's micro-batches; returns global (loss, accuracy, tokens, grad norm).
    A non-finite loss or gradient norm skips the update."""
    model.train()
    local = sum(batch.scored for batch in batches)
    (total,) = distributed.all_sum([float(local)], context, context.device)
    # DDP averages gradients over ranks, hence * world_size: the sum is over the global batch
    scale = context.world_size / max(total, 1.0)
    loss_sum = correct = 0.0
    for index, batch in enumerate(batches):
        with distributed.gradient_sync(model, enabled=index == len(batches) - 1):
            loss, hits, _ = score(model, batch, autocast)
            (loss * scale).backward()
        loss_sum, correct = loss_sum + loss.item(), correct + hits.item()
    clip = config.optimizer.grad_clip
    grad_norm = float(nn.utils.clip_grad_norm_(model.parameters(), clip if clip else float("inf")))
    loss_sum, correct = distributed.all_sum([loss_sum, correct], context, context.device)
    loss = loss_sum / max(total, 1.0)
    if finite(loss, grad_norm):  # else the caller stops: weights stay as the last finite step left them
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss, correct / max(total, 1.0), total, grad_norm


def step_batches(task: Task, config: TrainingConfig, step: int, seq_len: int, share: int,
                 context: distributed.Context) -> list[Batch]:
    """This rank's slice of the step's global batch, cut into grad_accum micro-batches."""
    first = context.rank * share
    micro = share // config.grad_accum
    batches = []
    for start in range(first, first + share, micro):
        seeds = [example_seed(config.seed, "train", step, index) for index in range(start, start + micro)]
        batches.append(task.batch(seq_len, seeds, pack=task.pack).to(context.device))
    return batches


def check_batch(config: TrainingConfig, world_size: int) -> int:
    """Examples per rank per step; the global batch must split evenly over ranks and micro-batches."""
    if config.batch_size % (world_size * config.grad_accum):
        raise TrainingError(f"training.batch_size {config.batch_size} does not split over {world_size} processes "
                            f"x {config.grad_accum} accumulation steps")
    return config.batch_size // world_size


def compile_blocks(model: nn.Module) -> None:
    """torch.compile each of the model's repeated blocks, in place.

    In place, the module, its parameters and its state_dict keys stay what they were, so
    checkpoints, DDP and FSDP see the same model; only the blocks' calls run compiled. Block by
    block rather than whole: a block's graph takes its weights as inputs, so each kind of block
    (and window) compiles once and serves every block of its kind, a fraction of the one-time cost.
    Evaluation runs uncompiled (evaluate.py).
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


def make_optimizer(model: nn.Module, config: TrainingConfig) -> torch.optim.AdamW:
    """The training section's AdamW (see adamw)."""
    return adamw(model, config.optimizer)


def adamw(model: nn.Module, settings: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW over the parameters that require gradients; weight decay on matrices (projections,
    embeddings) only, not on norms and biases."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(settings.beta1, settings.beta2))


def make_curriculum(config: TrainingConfig, model: nn.Module) -> Curriculum | None:
    if config.curriculum is None:
        return None
    length = config.curriculum.segment_size or getattr(model, "segment_size", None)
    if not length:
        raise TrainingError("training.curriculum: set segment_size, or train a model that has one (ARMT)")
    return Curriculum(config.curriculum, config.steps, length, config.seed)


def autocast_context(config: TrainingConfig, context: distributed.Context):
    """bf16 autocast when asked for, or with precision auto on a GPU that supports bf16; else fp32.

    Not under FSDP's bf16 mixed precision, whose bf16 weights already make the compute bf16 (in one
    process nothing is sharded, and precision auto applies as usual).
    """
    mixed = context.distributed and config.parallel == "fsdp" and config.mixed_precision is not None
    device = context.device
    use_bf16 = config.precision == "bf16" or (
        config.precision == "auto" and not mixed and device.type == "cuda" and torch.cuda.is_bf16_supported())
    return torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext()
