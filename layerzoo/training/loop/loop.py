"""The training loop: an objective trained step by step in a folder of its own (metrics.jsonl,
checkpoints/step-N/), resumable from any of its checkpoints.

Each step: the SWA window and the sequence length of the step, the learning rate, the objective's
forward and backward, one optimizer step (skipped, and the run stopped, when the loss or the
gradient is not finite), the log, the held-out measure at the schedule's long window, a checkpoint,
and a stop when SIGINT or SIGTERM arrived. Everything random is keyed by (seed, step, example),
and saving or noting signals draws no random number, so a resumed run is the uninterrupted one.
"""

from __future__ import annotations

import contextlib
import math
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from tqdm.auto import tqdm

from ...kernels.common.native_build import reporting_builds
from ...mixers import at_window, set_window
from ...specs import Spec
from ..config import OptimizerConfig
from ..errors import TrainingError
from ..objectives.base import Objective
from ..objectives.batches import LOCAL
from ..parallel import distributed
from ..runs.checkpoint import Checkpoint, load_training_state, save_checkpoint
from ..runs.metrics import MetricsLog
from ..runs.run_checkpoints import checkpoint_dir, prune_checkpoints
from ..runs.tensorboard import TensorBoardLog
from .curriculum import Curriculum
from .interrupt import StopSignals, TrainingInterrupted
from .schedules import WindowSchedule, learning_rate


@dataclass(frozen=True)
class LoopSettings:
    """How long and how the loop runs.

    Args:
        steps: optimizer steps.
        batch_size: sequences a step (for the tokens logged).
        seq_len: tokens a sequence (a curriculum may change it per step).
        optimizer: AdamW's settings and the learning-rate schedule.
        log_every: steps between metrics.jsonl records (the last step is always logged).
        eval_every: steps between held-out measures; None: at the last step only.
        checkpoint_every: steps between checkpoints; None: at the last step only.
        keep_checkpoints: the newest checkpoints kept; None: all.
        lr_key: the setting a diverged run is told to lower ("training.optimizer.lr").
        name: a stage's name, on the progress bar and in the interrupt's message.
        tensorboard: records mirrored to TensorBoard events in the folder's tensorboard/.
        checkpoint_trained_only: checkpoints hold only the parameters that train (a stage that
            trains part of its model; the rest is its caller's to restore on resume).
    """

    steps: int
    batch_size: int
    seq_len: int
    optimizer: OptimizerConfig
    log_every: int
    eval_every: int | None
    checkpoint_every: int | None
    keep_checkpoints: int | None
    lr_key: str
    name: str | None = None
    tensorboard: bool = False
    checkpoint_trained_only: bool = False


def run_loop(objective: Objective, folder: str | Path, spec: Spec, settings: LoopSettings, *,
             windows: WindowSchedule | None = None, window_model: nn.Module | None = None,
             curriculum: Curriculum | None = None, checkpoint: Checkpoint | None = None,
             context: distributed.Context = LOCAL, progress: bool = True) -> dict[str, Any]:
    """Train `objective` to settings.steps in `folder` (metrics.jsonl, checkpoints/step-N/).

    Args:
        objective: what is trained (its `model`, `backward`, `heldout`).
        folder: the run's folder, or a stage's in it.
        spec: saved in each checkpoint (what a resume checks against).
        settings: the loop's LoopSettings.
        windows: the SWA window of each step (None: the model's own), set in `window_model`
            (default objective.model), which ends at the schedule's long window.
        window_model: the module whose SWA layers the windows set.
        curriculum: ARMT's segment curriculum: each step's sequence length and learning-rate stage.
        checkpoint: the checkpoint to continue from, its weights already in objective.model
            (its optimizer and RNG states are loaded here); None: from step 0.
        context: the data-parallel context (one process by default).
        progress: a progress bar, and the held-out measures printed above it.

    Returns:
        The last step's record, its held-out measures included.

    Raises:
        TrainingInterrupted: SIGINT or SIGTERM arrived; a checkpoint of the step was saved.
        TrainingError: a non-finite loss or gradient, before the weights were updated.
    """
    folder = Path(folder)
    window_model = objective.model if window_model is None else window_model
    optimizer = adamw(objective.model, settings.optimizer)
    start = 0 if checkpoint is None else load_training_state(checkpoint, objective.model, optimizer)["step"]
    del checkpoint  # its tensors are loaded; do not hold a second copy through training
    eval_window = None if windows is None else windows.eval_window
    mirrors = [TensorBoardLog(folder / "tensorboard", start + 1)] if settings.tensorboard and context.is_main else []
    log = MetricsLog(folder / "metrics.jsonl" if context.is_main else None, keep_through=start, mirrors=mirrors)
    bar = tqdm(total=settings.steps, initial=start, unit="step", desc=settings.name, dynamic_ncols=True,
               mininterval=0.5, disable=not (progress and context.is_main))
    seq_len = (lambda step: settings.seq_len) if curriculum is None else curriculum.seq_len
    tokens = settings.batch_size * sum(map(seq_len, range(start)))
    started, read, record, saved = time.perf_counter(), 0, {}, start or None
    with bar, StopSignals() as signals, contextlib.ExitStack() as closing:
        for mirror in mirrors:
            closing.callback(mirror.close)  # flushed however the loop ends
        if not bar.disable:
            closing.enter_context(kernel_builds_on(bar, settings.name or ""))
        for step in range(start, settings.steps):
            window = None if windows is None else windows.window(step)
            if window is not None:
                set_window(window_model, window)
            length = seq_len(step)
            progress_step, stage_steps = (step, settings.steps) if curriculum is None else curriculum.stage_progress(step)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(progress_step, stage_steps, settings.optimizer)
            loss, logged, grad_norm = optimizer_step(objective, optimizer, step, length, settings.optimizer.grad_clip)
            if not finite(loss, grad_norm):
                raise TrainingError(diverged(step + 1, loss, grad_norm, saved and checkpoint_dir(folder, saved),
                                             settings.lr_key))
            read += settings.batch_size * length
            tokens += settings.batch_size * length
            record = {"step": step + 1, "loss": loss, **logged, "lr": optimizer.param_groups[0]["lr"],
                      "window": window, "seq_len": length, "grad_norm": grad_norm, "tokens": tokens,
                      "tokens_per_s": read / (time.perf_counter() - started)}
            bar.update(1)
            bar.set_postfix({"loss": f"{loss:.4g}", **{key: f"{value:.3g}" for key, value in logged.items()},
                             "tok_s": f"{record['tokens_per_s']:.0f}"}, refresh=False)
            last = step + 1 == settings.steps
            if (step + 1) % settings.log_every == 0 or last:
                log.write(record)
            if (settings.eval_every and (step + 1) % settings.eval_every == 0) or last:
                with at_window(window_model, eval_window):
                    measured = {f"eval_{key}": value for key, value in objective.heldout().items()}
                record.update(measured)
                log.write({"step": step + 1, **measured})
                if not bar.disable:
                    bar.write(f"step {step + 1}: " + ", ".join(f"{key.replace('_', ' ', 1)} {value:.4f}"
                                                              for key, value in measured.items()))
            stop = stop_requested(signals, context)
            if (settings.checkpoint_every and (step + 1) % settings.checkpoint_every == 0) or last or stop:
                saved = step + 1
                save_checkpoint(checkpoint_dir(folder, saved), objective.model, optimizer, spec, saved, record,
                                write=context.is_main, trained_only=settings.checkpoint_trained_only)
                if context.is_main:
                    prune_checkpoints(folder, saved, settings.keep_checkpoints)
            if stop:
                of = f" of {settings.name}" if settings.name else ""
                raise TrainingInterrupted(f"interrupted by {stop.name} after step {saved}{of}; saved "
                                          f"{checkpoint_dir(folder, saved)}; continue with --resume", stop)
    if eval_window is not None:
        set_window(window_model, eval_window)
    return record


def optimizer_step(objective: Objective, optimizer: torch.optim.Optimizer, step: int, seq_len: int,
                   clip: float | None) -> tuple[float, dict[str, float], float]:
    """One step of the objective: (loss, what it logs, gradient norm before clipping). A
    non-finite loss or gradient norm skips the update (the caller stops)."""
    objective.model.train()
    loss, logged = objective.backward(step, seq_len)
    # in the model's order, as the norm adds the parameters' norms up in the order it is given them
    params = [p for p in objective.model.parameters() if p.requires_grad]
    grad_norm = float(nn.utils.clip_grad_norm_(params, clip if clip else float("inf")))
    if finite(loss, grad_norm):
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss, logged, grad_norm


def adamw(model: nn.Module, settings: OptimizerConfig) -> torch.optim.AdamW:
    """AdamW over the parameters that require gradients; weight decay on matrices (projections,
    embeddings) only, not on norms and biases."""
    params = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in params if p.dim() >= 2]
    rest = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": settings.weight_decay}, {"params": rest, "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=settings.lr, betas=(settings.beta1, settings.beta2))


def kernel_builds_on(bar: tqdm, label: str) -> contextlib.AbstractContextManager:
    """A compiled kernel's first-use build (in the first step, or the first measure) on the
    progress bar: its notice printed above the bar, and the bar labelled "building kernels" until
    it ends (then `label` again), rather than standing at a silent 0%."""
    def report(notice: str | None) -> None:
        if notice is not None:
            bar.write(notice, file=sys.stderr)
        bar.set_description_str(label if notice is None else "building kernels", refresh=True)

    return reporting_builds(report)


def stop_requested(signals: StopSignals, context: distributed.Context):
    """The signal that asks to stop after this step (SIGTERM when it reached another rank), or None.
    Every rank agrees, so that all of them save the same step and stop."""
    (count,) = distributed.all_sum([float(signals.received is not None)], context, context.device)
    return signals.received or (signal.SIGTERM if count else None)


def finite(*values: float) -> bool:
    return all(math.isfinite(value) for value in values)


def diverged(step: int, loss: float, grad_norm: float, last_checkpoint: Path | None, lr_key: str) -> str:
    """The one-line error of a step whose loss or gradient is not finite; lr_key: the setting to lower."""
    last = f"the last checkpoint is {last_checkpoint}" if last_checkpoint else "no checkpoint was saved"
    return (f"step {step}: non-finite loss or gradient (loss {loss:.4g}, grad norm {grad_norm:.4g}); stopped before "
            f"updating the weights, {last}; try a lower {lr_key}")
