"""Distillation's two stages as objectives: a student distilled from a frozen teacher on text.

Stage 1 (`Alignment`) trains the converted layers' mixers alone, each to the teacher's attention
output on the teacher's own input (alignment.py); stage 2 (`EndToEnd`) trains the whole student
(or LoRA adapters around it) to the teacher's next-token distributions (divergence.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import torch
from torch import nn

from ...tasks import Batch, Task
from ..errors import TrainingError
from ..parallel.context import ContextGroup
from ..parallel.distributed import Context, all_sum, sum_gradients
from .alignment import alignment_sums, heldout_alignment
from .batches import LOCAL, training_batch
from .divergence import batch_divergence, heldout_divergence


class DistillationStage:
    """What both stages share: one batch of `batch_size` sequences a step, drawn from (seed, the
    stage's name, step, index); held-out measures on `samples` sequences of the held-out split,
    drawn from heldout_seed. Every forward, the teacher's too, runs in `autocast` (bf16 autocast,
    precision.py); the losses are computed in fp32.

    Under torchrun (`context`), each data-parallel group of ranks draws its share of the batch,
    and with a context `group` each rank of it scores its piece of every sequence: losses are sums
    divided by the whole batch's count and gradients are summed over all ranks, so that the ranks
    step as one process does. The held-out sequences split over all ranks."""

    def __init__(self, name: str, model: nn.Module, teacher: nn.Module, task: Task, eval_task: Task, *, seed: int,
                 batch_size: int, heldout_seed: int, samples: int, eval_batch_size: int,
                 autocast: contextlib.AbstractContextManager = contextlib.nullcontext(), context: Context = LOCAL,
                 group: ContextGroup | None = None):
        self.name, self.model, self.teacher, self.task, self.eval_task = name, model, teacher, task, eval_task
        self.seed, self.autocast, self.context, self.group = seed, autocast, context, group
        self.examples = rank_examples(name, batch_size, context, 1 if group is None else group.size)
        self.measure = dict(seed=heldout_seed, samples=samples, batch_size=eval_batch_size, autocast=autocast,
                            context=context)

    def backward(self, step: int, seq_len: int) -> tuple[float, dict[str, float]]:
        context = self.context
        batch = training_batch(self.task, seq_len, self.seed, self.name, step, self.examples, context.device)
        loss_sum, count, logged = self.sums(batch)
        total, loss, *values = all_sum([float(count), loss_sum.item(), *logged.values()], context, context.device)
        total = max(total, 1.0)
        (loss_sum / total).backward()
        sum_gradients(self.model, context)
        return loss / total, {key: value / total for key, value in zip(logged, values)}

    def sums(self, batch: Batch) -> tuple[torch.Tensor, int, dict[str, float]]:
        """(the loss summed over this rank's share (0-d, differentiable), the count it is a mean
        over when divided by, what is logged beside it summed likewise) of a batch."""
        raise NotImplementedError


def rank_examples(name: str, batch_size: int, context: Context, context_size: int) -> range:
    """The indices of the examples of each step that this rank's data-parallel group (the world's
    ranks in groups of context_size) draws; a one-line TrainingError when the batch does not split."""
    groups = context.world_size // context_size
    if batch_size % groups:
        raise TrainingError(f"distill.{name}.batch_size {batch_size} does not split over {groups} data-parallel "
                            f"groups ({context.world_size} processes, context {context_size})")
    share = batch_size // groups
    first = context.rank // context_size * share
    return range(first, first + share)


class Alignment(DistillationStage):
    """Stage 1: the mean over the converted `layers` of each new mixer's squared error to the
    teacher's attention output. Only those mixers train; `seq_len` is the held-out sequences'."""

    def __init__(self, student: nn.Module, teacher: nn.Module, layers: Sequence[int], seq_len: int, **stage):
        super().__init__("align", student, teacher, **stage)
        self.layers, self.seq_len = tuple(layers), seq_len
        student.requires_grad_(False)
        for layer in self.layers:
            student.blocks[layer].mixer.requires_grad_(True)

    def sums(self, batch: Batch) -> tuple[torch.Tensor, int, dict[str, float]]:
        errors, count = alignment_sums(self.teacher, self.model, self.layers, batch, self.autocast, self.group)
        loss = torch.stack(list(errors.values())).sum() / len(errors)  # the mean over layers
        return loss, count, {f"mse_layer{layer}": error.item() for layer, error in errors.items()}

    def heldout(self) -> dict[str, float]:
        return heldout_alignment(self.teacher, self.model, self.layers, self.eval_task, self.seq_len, **self.measure)


class EndToEnd(DistillationStage):
    """Stage 2: KL(teacher || model) at `temperature` plus ce_weight x the cross-entropy on the
    tokens, per scored token. `model` is the student, or the student inside LoRA adapters."""

    def __init__(self, model: nn.Module, teacher: nn.Module, seq_len: int, temperature: float, ce_weight: float,
                 **stage):
        super().__init__("end_to_end", model, teacher, **stage)
        self.seq_len, self.temperature, self.ce_weight = seq_len, temperature, ce_weight

    def sums(self, batch: Batch) -> tuple[torch.Tensor, int, dict[str, float]]:
        kl, ce, count = batch_divergence(self.model, self.teacher, batch, self.temperature, self.autocast, self.group)
        return kl + self.ce_weight * ce, count, {"kl": kl.item(), "ce": ce.item()}

    def heldout(self) -> dict[str, float]:
        scores = heldout_divergence(self.model, self.teacher, self.eval_task, self.seq_len, **self.measure)["intact"]
        return {"loss": scores["kl"] + self.ce_weight * scores["loss"], "kl": scores["kl"], "ce": scores["loss"]}
