"""One stage of a distillation as a resumable loop, in its own folder of the run folder:
metrics.jsonl and checkpoints/step-N/ as a training run has them.

As in training, everything random is keyed by (seed, stage, step, example index), so a resumed
stage sees exactly what an uninterrupted one does; the optimizer's and the RNG's states travel
in its checkpoints.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from ...mixers import at_window, set_window
from ...specs import Spec
from ...tasks import Batch, Task, example_seed
from ..errors import TrainingError
from ..loop.interrupt import StopSignals, TrainingInterrupted
from ..loop.schedules import WindowSchedule, learning_rate
from ..loop.trainer import adamw, diverged, finite, kernel_builds_on
from ..runs.checkpoint import Checkpoint, load_training_state, save_checkpoint
from ..runs.metrics import MetricsLog
from ..runs.run_checkpoints import checkpoint_dir, prune_checkpoints
from .config import DistillConfig, StageConfig


@dataclass
class Stage:
    """A stage: what it trains and checkpoints, how it scores a training batch, how it is measured
    on held-out text, and (stage 2) the SWA window of each step."""

    name: str  # "align" or "end_to_end": its folder in the run folder and its seed's key
    settings: StageConfig
    model: nn.Module  # trained and checkpointed: the student, or the student wrapped with LoRA adapters
    student: nn.Module  # whose SWA layers the window schedule sets
    loss: Callable[[Batch], tuple[torch.Tensor, dict[str, float]]]  # mean loss (0-d) and what to log beside it
    heldout: Callable[[], dict[str, float]]  # held-out measures, logged as eval_<key>
    windows: WindowSchedule | None = None

    @property
    def tokens_per_step(self) -> int:
        return self.settings.batch_size * self.settings.seq_len


def run_stage(stage: Stage, folder: Path, spec: Spec, config: DistillConfig, task: Task, device: torch.device,
              checkpoint: Checkpoint | None = None, progress: bool = True) -> None:
    """Train `stage` to its last step in `folder`, from `checkpoint` (its weights already loaded
    into stage.model) or from step 0. SIGINT or SIGTERM saves a checkpoint after the current step
    and raises TrainingInterrupted; a non-finite loss or gradient raises TrainingError."""
    settings = stage.settings
    optimizer = adamw(stage.model, settings.optimizer)
    start = 0 if checkpoint is None else load_training_state(checkpoint, stage.model, optimizer)["step"]
    log = MetricsLog(folder / "metrics.jsonl", keep_through=start)
    eval_window = None if stage.windows is None else stage.windows.eval_window
    bar = tqdm(total=settings.steps, initial=start, unit="step", desc=stage.name, dynamic_ncols=True, mininterval=0.5,
               disable=not progress)
    started, saved = time.perf_counter(), start or None
    with bar, StopSignals() as signals, contextlib.ExitStack() as closing:
        if not bar.disable:
            closing.enter_context(kernel_builds_on(bar))
        for step in range(start, settings.steps):
            window = None if stage.windows is None else stage.windows.window(step)
            if window is not None:
                set_window(stage.student, window)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(step, settings.steps, settings.optimizer)
            seeds = [example_seed(config.seed, stage.name, step, index) for index in range(settings.batch_size)]
            batch = task.batch(settings.seq_len, seeds, pack=task.pack).to(device)
            loss, logged, grad_norm = optimizer_step(stage, optimizer, batch)
            if not finite(loss, grad_norm):
                raise TrainingError(diverged(step + 1, loss, grad_norm, saved and checkpoint_dir(folder, saved),
                                             f"distill.{stage.name}.optimizer.lr"))
            metrics = {"step": step + 1, "loss": loss, **logged, "lr": optimizer.param_groups[0]["lr"], "window": window,
                       "grad_norm": grad_norm, "tokens": (step + 1) * stage.tokens_per_step,
                       "tokens_per_s": (step + 1 - start) * stage.tokens_per_step / (time.perf_counter() - started)}
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
            last = step + 1 == settings.steps
            if (step + 1) % config.log_every == 0 or last:
                log.write(metrics)
            if (config.eval.every and (step + 1) % config.eval.every == 0) or last:
                with at_window(stage.student, eval_window):
                    result = {f"eval_{key}": value for key, value in stage.heldout().items()}
                metrics.update(result)
                log.write({"step": step + 1, **result})
            stop = signals.received
            if (config.checkpoint_every and (step + 1) % config.checkpoint_every == 0) or last or stop:
                saved = step + 1
                save_checkpoint(checkpoint_dir(folder, saved), stage.model, optimizer, spec, saved, metrics)
                prune_checkpoints(folder, saved, config.keep_checkpoints)
            if stop:
                raise TrainingInterrupted(f"interrupted by {stop.name} after step {saved} of {stage.name}; saved "
                                          f"{checkpoint_dir(folder, saved)}; continue with --resume", stop)
    if eval_window is not None:
        set_window(stage.student, eval_window)


def optimizer_step(stage: Stage, optimizer: torch.optim.Optimizer, batch: Batch) -> tuple[float, dict[str, float], float]:
    """One step on one batch: (loss, what the stage logs, gradient norm before clipping). A
    non-finite loss or gradient norm skips the update (the caller stops)."""
    stage.model.train()
    loss, logged = stage.loss(batch)
    loss.backward()
    clip = stage.settings.optimizer.grad_clip
    params = [p for group in optimizer.param_groups for p in group["params"]]
    grad_norm = float(nn.utils.clip_grad_norm_(params, clip if clip else float("inf")))
    if finite(loss.item(), grad_norm):
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item(), logged, grad_norm
