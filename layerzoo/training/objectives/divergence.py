"""How far a model's next-token distributions are from a teacher's: KL(teacher || model) at a
temperature and the cross-entropy on the tokens, summed over the scored positions, and both
measured on held-out text."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from ...tasks import IGNORE, Batch, Task
from ..parallel.context import ContextGroup, context_parallel
from ..parallel.context.batches import piece_of
from ..parallel.distributed import Context, all_sum
from .batches import evaluating, forward_batch, heldout_batches, local, uncompiled


def divergence_sums(logits: torch.Tensor, teacher_logits: torch.Tensor, targets: torch.Tensor,
                    temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, int]:
    """(KL sum, cross-entropy sum, scored positions) over the positions of targets (B, T) that are
    not IGNORE; logits, teacher_logits (B, T, vocab), differentiable in logits.

    KL(p_teacher || p_model) with both distributions the softmax of logits / temperature, times
    temperature^2 (Hinton et al.), so that its gradients keep their scale as the temperature
    changes; at temperature 1 it is the plain KL. The cross-entropy is at temperature 1. All in fp32.

    Lean on memory, as each (B, T, vocab) tensor is large: rows are copied out only where some
    position is not scored, the teacher's log-probabilities carry no autograd history, and at
    temperature 1 the cross-entropy reuses the student's log-probabilities of the KL.
    """
    scored = targets != IGNORE
    every = bool(scored.all())

    def rows(t: torch.Tensor) -> torch.Tensor:  # (positions scored, vocab) in fp32
        return (t if every else t[scored]).float().flatten(0, -2)

    def log_probs(t: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(t if temperature == 1 else t / temperature, -1)

    with torch.no_grad():
        teacher = log_probs(rows(teacher_logits))
    student = log_probs(rows(logits))
    kl = F.kl_div(student, teacher, log_target=True, reduction="sum") * temperature**2
    labels = (targets if every else targets[scored]).flatten()
    if temperature == 1:
        ce = F.nll_loss(student, labels, reduction="sum")
    else:
        ce = F.cross_entropy(rows(logits), labels, reduction="sum")
    return kl, ce, int(scored.sum())


@torch.no_grad()
@uncompiled
def heldout_divergence(model: nn.Module, teacher: nn.Module | None, task: Task, seq_len: int, samples: int, seed: int,
                       *, batch_size: int = 8, variants: dict[str, Callable[[], contextlib.AbstractContextManager]]
                       | None = None, device: torch.device | str = "cpu", autocast=contextlib.nullcontext(),
                       progress: str | None = None, context: Context | None = None
                       ) -> dict[str, dict[str, float | None]]:
    """For each variant {name: a context manager factory under which the model runs}: its mean
    held-out cross-entropy ("loss") and KL to the teacher ("kl", None without a teacher), over
    `samples` seeded sequences of `task`'s split. The teacher runs once per batch, whatever the
    number of variants. Without variants: {"intact": ...}, the model as it is. Batches go to `device`;
    both models run in `autocast` (bf16 autocast, precision.py), the measures on fp32 logits.
    progress: the label of a bar (on stderr) counting the model's forwards, variants by batches; None: no bar.
    context: the ranks the sequences split over, each on its device (None: this process alone, on `device`)."""
    context = local(device) if context is None else context
    variants = variants or {"intact": contextlib.nullcontext}
    sums = {name: [0.0, 0.0, 0] for name in variants}
    forwards = math.ceil(math.ceil(samples / context.world_size) / batch_size) * len(variants)
    with evaluating(model, teacher), tqdm(total=forwards, desc=progress, unit="forward", disable=progress is None,
                                          dynamic_ncols=True, mininterval=0.5) as bar:
        for batch, counts in heldout_batches(task, seq_len, samples, seed, batch_size=batch_size, context=context):
            teacher_logits = None if teacher is None else forward_batch(teacher, batch, autocast)
            for name, variant in variants.items():
                with variant():
                    logits = forward_batch(model, batch, autocast)
                kl, ce, count = divergence_sums(logits, logits if teacher_logits is None else teacher_logits, batch.targets)
                if counts:
                    total = sums[name]
                    total[0], total[1], total[2] = total[0] + kl.item(), total[1] + ce.item(), total[2] + count
                bar.update(1)
    flat = all_sum([value for total in sums.values() for value in total], context, context.device)
    return {name: {"loss": ce / max(count, 1), "kl": None if teacher is None else kl / max(count, 1)}
            for name, (kl, ce, count) in zip(sums, zip(flat[0::3], flat[1::3], flat[2::3]))}


def batch_divergence(model: nn.Module, teacher: nn.Module, batch: Batch, temperature: float = 1.0,
                     autocast=contextlib.nullcontext(), group: ContextGroup | None = None
                     ) -> tuple[torch.Tensor, torch.Tensor, int]:
    """divergence_sums of the model (differentiable) against the teacher (no gradients) on one
    batch, both forwards in `autocast`.

    group: a context group: the teacher runs the whole batch (its rows the same on every member),
    the model this rank's piece under context_parallel, and the sums run over the piece (sum them,
    and their gradients, over the group)."""
    with torch.no_grad():
        teacher_logits = forward_batch(teacher, batch, autocast)
    piece, split = batch, contextlib.nullcontext()
    if group is not None:
        piece, pieces = piece_of(batch, group)
        # packed examples run as one row: the teacher's (B, T, vocab) flattened into it
        rows = teacher_logits.reshape(1, -1, teacher_logits.shape[-1]) if pieces.packed else teacher_logits
        teacher_logits, split = pieces.slice(rows), context_parallel(model, pieces)
    with split:
        logits = forward_batch(model, piece, autocast)
    return divergence_sums(logits, teacher_logits, piece.targets, temperature)
