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
from .alignment import alignment_loss, heldout_alignment
from .batches import training_batch
from .divergence import batch_divergence, heldout_divergence


class DistillationStage:
    """What both stages share: one batch of `batch_size` sequences a step, drawn from (seed, the
    stage's name, step, index); held-out measures on `samples` sequences of the held-out split,
    drawn from heldout_seed. Every forward, the teacher's too, runs in `autocast` (bf16 autocast,
    precision.py); the losses are computed in fp32."""

    def __init__(self, name: str, model: nn.Module, teacher: nn.Module, task: Task, eval_task: Task, *, seed: int,
                 batch_size: int, heldout_seed: int, samples: int, eval_batch_size: int, device: torch.device,
                 autocast: contextlib.AbstractContextManager = contextlib.nullcontext()):
        self.name, self.model, self.teacher, self.task, self.eval_task = name, model, teacher, task, eval_task
        self.seed, self.batch_size, self.device, self.autocast = seed, batch_size, device, autocast
        self.measure = dict(seed=heldout_seed, samples=samples, batch_size=eval_batch_size, device=device,
                            autocast=autocast)

    def backward(self, step: int, seq_len: int) -> tuple[float, dict[str, float]]:
        batch = training_batch(self.task, seq_len, self.seed, self.name, step, range(self.batch_size), self.device)
        loss, logged = self.loss(batch)
        loss.backward()
        return loss.item(), logged

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        raise NotImplementedError


class Alignment(DistillationStage):
    """Stage 1: the mean over the converted `layers` of each new mixer's squared error to the
    teacher's attention output. Only those mixers train; `seq_len` is the held-out sequences'."""

    def __init__(self, student: nn.Module, teacher: nn.Module, layers: Sequence[int], seq_len: int, **stage):
        super().__init__("align", student, teacher, **stage)
        self.layers, self.seq_len = tuple(layers), seq_len
        student.requires_grad_(False)
        for layer in self.layers:
            student.blocks[layer].mixer.requires_grad_(True)

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        return alignment_loss(self.teacher, self.model, self.layers, batch, self.autocast)

    def heldout(self) -> dict[str, float]:
        return heldout_alignment(self.teacher, self.model, self.layers, self.eval_task, self.seq_len, **self.measure)


class EndToEnd(DistillationStage):
    """Stage 2: KL(teacher || model) at `temperature` plus ce_weight x the cross-entropy on the
    tokens, per scored token. `model` is the student, or the student inside LoRA adapters."""

    def __init__(self, model: nn.Module, teacher: nn.Module, seq_len: int, temperature: float, ce_weight: float,
                 **stage):
        super().__init__("end_to_end", model, teacher, **stage)
        self.seq_len, self.temperature, self.ce_weight = seq_len, temperature, ce_weight

    def loss(self, batch: Batch) -> tuple[torch.Tensor, dict[str, float]]:
        kl, ce, count = batch_divergence(self.model, self.teacher, batch, self.temperature, self.autocast)
        scale = 1 / max(count, 1)
        return (kl + self.ce_weight * ce) * scale, {"kl": kl.item() * scale, "ce": ce.item() * scale}

    def heldout(self) -> dict[str, float]:
        scores = heldout_divergence(self.model, self.teacher, self.eval_task, self.seq_len, **self.measure)["intact"]
        return {"loss": scores["kl"] + self.ce_weight * scores["loss"], "kl": scores["kl"], "ce": scores["loss"]}
