"""Language modelling: next-token cross-entropy over a task's scored tokens, the step's batch split
over data-parallel ranks and accumulation micro-batches; measured by loss and accuracy on seeded
held-out examples."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn

from ...tasks import IGNORE, Batch, Task, heldout_seed
from ..config import TrainingConfig
from ..errors import TrainingError
from ..parallel import distributed
from ..parallel.context import ContextGroup, context_parallel
from ..parallel.context.armt import armt_of
from ..parallel.context.batches import piece_of
from ..parallel.distributed import Context, all_sum
from .batches import LOCAL, evaluating, forward_batch, heldout_batches, training_batch, uncompiled


class LanguageModel:
    """The objective of `layerzoo train`: `model` (wrapped for data parallelism where it is) on
    `task`'s examples of the step, the mean loss over the scored tokens of the whole global batch
    (so N ranks step as one process with the same global batch); held out, loss and accuracy on
    `eval_task` at training.seq_len."""

    def __init__(self, model: nn.Module, task: Task, eval_task: Task, config: TrainingConfig, context: Context,
                 autocast: contextlib.AbstractContextManager):
        self.model, self.task, self.eval_task, self.config = model, task, eval_task, config
        self.context, self.autocast = context, autocast
        # K consecutive ranks share each example, a piece each: the batch splits over world / K
        self.group = ContextGroup.from_world(config.context, config.balance_attention) if config.context > 1 else None
        armt = None if self.group is None else armt_of(model)  # its pieces hold whole segments
        self.segment_size = None if armt is None else armt.segment_size
        self.share = examples_per_rank(config, context.world_size // config.context)

    def backward(self, step: int, seq_len: int) -> tuple[float, dict[str, float]]:
        batches = self.batches(step, seq_len)
        context = self.context
        mine = batches if self.group is None else [piece_of(batch, self.group, self.segment_size)[0] for batch in batches]
        scored = sum(batch.scored for batch in mine)
        (total,) = all_sum([float(scored)], context, context.device)
        # DDP averages gradients over ranks, hence * world_size: the sum is over the global batch
        scale = context.world_size / max(total, 1.0)
        loss_sum = correct = 0.0
        for index, batch in enumerate(batches):
            with distributed.gradient_sync(self.model, enabled=index == len(batches) - 1):
                loss, hits = self.score_piece(batch)
                (loss * scale).backward()
            loss_sum, correct = loss_sum + loss.item(), correct + hits.item()
        loss_sum, correct = all_sum([loss_sum, correct], context, context.device)
        return loss_sum / max(total, 1.0), {"accuracy": correct / max(total, 1.0)}

    def score_piece(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """score's loss and hits, on this rank's piece of the batch under context parallelism."""
        if self.group is None:
            return score(self.model, batch, self.autocast)[:2]
        piece, pieces = piece_of(batch, self.group, self.segment_size)
        with context_parallel(self.model, pieces):
            return score(self.model, piece, self.autocast)[:2]

    def batches(self, step: int, seq_len: int) -> list[Batch]:
        """This rank's slice of the step's global batch (its context group's), cut into grad_accum micro-batches."""
        config = self.config
        first = self.context.rank // config.context * self.share
        micro = self.share // config.grad_accum
        return [training_batch(self.task, seq_len, config.seed, "train", step, range(start, start + micro),
                               self.context.device) for start in range(first, first + self.share, micro)]

    def heldout(self) -> dict[str, float]:
        config = self.config
        return score_heldout(self.model, self.eval_task, config.seq_len, config.eval.samples, heldout_seed(config.seed),
                        batch_size=config.eval.batch_size, context=self.context, autocast=self.autocast)


def examples_per_rank(config: TrainingConfig, world_size: int) -> int:
    """Examples per rank per step; the global batch must split evenly over ranks and micro-batches."""
    if config.batch_size % (world_size * config.grad_accum):
        raise TrainingError(f"training.batch_size {config.batch_size} does not split over {world_size} processes "
                            f"x {config.grad_accum} accumulation steps")
    return config.batch_size // world_size


def score(model: nn.Module, batch: Batch, autocast: contextlib.AbstractContextManager, scored_tail: bool = False,
          exact: bool = False) -> tuple[torch.Tensor, torch.Tensor, int, int]:
    """(summed cross-entropy (0-d, differentiable), hits (0-d), scored tokens, answers) over the
    positions of batch.targets that are not IGNORE. hits: correct argmax predictions, or with
    `exact` the rows whose every scored token is right (unpacked rows: one answer each); answers:
    rows with a scored token. scored_tail (a CausalLM on unpacked rows): the head runs from the
    first scored position on only."""
    keep = tail_length(batch.targets) if scored_tail else 0
    logits = forward_batch(model, batch, autocast, logits_to_keep=keep)
    targets = batch.targets[:, -keep:] if keep else batch.targets
    loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum")
    scored = targets != IGNORE
    right = (logits.argmax(-1) == targets) & scored
    answered = scored.any(-1)
    hits = (answered & (right == scored).all(-1)).sum() if exact else right.sum()
    return loss, hits, batch.scored, int(answered.sum())


def tail_length(targets: torch.Tensor) -> int:
    """Columns from the first one any row of targets (B, T) scores to the end (T: none scored)."""
    columns = (targets != IGNORE).any(0).nonzero()
    return targets.shape[1] - int(columns[0]) if len(columns) else targets.shape[1]


@torch.no_grad()
@uncompiled
def score_heldout(model: nn.Module, task: Task, seq_len: int, samples: int, seed: int, *, depth: float | None = None,
             batch_size: int = 16, context: Context = LOCAL, autocast=contextlib.nullcontext(),
             scored_tail: bool = False) -> dict[str, float]:
    """Mean loss over the scored tokens of `samples` seeded examples (the same ones every call),
    the samples split over data-parallel ranks, and accuracy: of the scored tokens, or of the
    examples' answers for a task scored by exact match (Task.exact); scored_tail as `score`'s."""
    totals = torch.zeros(4, dtype=torch.float64)  # loss, hits, scored tokens, answers
    with evaluating(model):
        for batch, counts in heldout_batches(task, seq_len, samples, seed, depth=depth, batch_size=batch_size,
                                             context=context):
            measured = score(model, batch, autocast, scored_tail, exact=task.exact)
            if counts:
                totals += torch.tensor([float(value) for value in measured])
    loss, hits, count, answers = all_sum(totals.tolist(), context, context.device)
    return {"loss": loss / max(count, 1), "accuracy": hits / max(answers if task.exact else count, 1)}
