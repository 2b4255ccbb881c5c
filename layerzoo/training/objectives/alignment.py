"""Stage 1's measure, per-layer alignment (LoLCATs' attention transfer): for each converted layer,
the mean squared error between the student's new mixer's output and the teacher's attention
output, both on the teacher's own input to that layer's mixer.

Each layer is aligned alone, on inputs that do not depend on the other converted layers, so one
teacher forward gives every layer's target, and an error in one layer never feeds the next.

A converted layer that computes what the teacher's attention computes on the sequences a stage
sees (an SWA layer whose window covers them, with the teacher's weights) is exact: it has nothing
to learn, and training it only moves it away (Adam turns its vanishing gradients into steps the
size of the learning rate), so it is not aligned (`exact_layers`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from ...mixers.attention import CausalAttention
from ...tasks import Batch
from ..parallel.context import ContextGroup, Pieces, context_parallel
from ..parallel.context.batches import piece_of
from ..parallel.distributed import Context, all_sum
from .batches import evaluating, forward_batch, heldout_batches, local, uncompiled

# What attention options may differ without changing what a layer computes on sequences its window
# covers: the window itself, and the kernel that computes it.
NOT_THE_FUNCTION = ("window", "backend")


def exact_layers(teacher: nn.Module, student: nn.Module, layers: Sequence[int], seq_len: int) -> list[int]:
    """Those of `layers` whose student mixer computes the teacher's mixer exactly on sequences of
    up to seq_len tokens: both attention (full or sliding window) with the same options but the
    window, windows that see the same keys within seq_len tokens, and equal tensors."""
    return [layer for layer in layers if same_attention(teacher.blocks[layer].mixer, student.blocks[layer].mixer, seq_len)]


def same_attention(teacher: nn.Module, student: nn.Module, seq_len: int) -> bool:
    """Whether two mixers are attention that computes the same (B, T <= seq_len, d_model) outputs."""
    if not (isinstance(teacher, CausalAttention) and isinstance(student, CausalAttention)):
        return False

    def function(mixer: CausalAttention) -> dict:
        return {key: value for key, value in dataclasses.asdict(mixer.options).items() if key not in NOT_THE_FUNCTION}

    def keys_seen(mixer: CausalAttention) -> int:
        return seq_len if mixer.window is None else min(mixer.window, seq_len)

    if function(teacher) != function(student) or keys_seen(teacher) != keys_seen(student):
        return False
    theirs, ours = teacher.state_dict(), student.state_dict()
    return theirs.keys() == ours.keys() and all(torch.equal(theirs[name], ours[name]) for name in ours)


@dataclass(frozen=True)
class MixerCall:
    """One call of a mixer inside a model's forward: x the normed hidden state it was given, y its
    output, both (B, T, d_model) (B = 1 for packed rows), and the packed rows' cu_seqlens or None."""

    x: torch.Tensor
    y: torch.Tensor
    cu_seqlens: torch.Tensor | None


@contextlib.contextmanager
def recorded_calls(model: nn.Module, layers: Sequence[int]) -> Iterator[dict[int, MixerCall]]:
    """Inside the block, each forward of `model` records the call of each of `layers`' mixers
    into the dict yielded, by layer index (the last call of each)."""
    calls: dict[int, MixerCall] = {}

    def recorder(layer: int):
        def record(module: nn.Module, args: tuple, kwargs: dict[str, Any], output: Any) -> None:
            y = output[0] if isinstance(output, tuple) else output
            calls[layer] = MixerCall(args[0] if args else kwargs["x"], y, kwargs.get("cu_seqlens"))
        return record

    handles = [model.blocks[layer].mixer.register_forward_hook(recorder(layer), with_kwargs=True) for layer in layers]
    try:
        yield calls
    finally:
        for handle in handles:
            handle.remove()


def teacher_calls(teacher: nn.Module, layers: Sequence[int], batch: Batch,
                  autocast=contextlib.nullcontext()) -> dict[int, MixerCall]:
    """The teacher's mixer calls of `layers` on `batch`, without gradients, its forward in `autocast`."""
    # its logits are not needed: on unpacked rows the head runs on the last position only
    keep = 1 if batch.cu_seqlens is None else 0
    with torch.no_grad(), recorded_calls(teacher, layers) as calls:
        forward_batch(teacher, batch, autocast, logits_to_keep=keep)
    return dict(calls)


def alignment_errors(student: nn.Module, calls: dict[int, MixerCall], autocast=contextlib.nullcontext(),
                     reduction: str = "mean") -> dict[int, torch.Tensor]:
    """{layer: squared error (0-d, fp32, differentiable in the student's mixer), its mean over the
    elements or (reduction "sum") their sum} between the student's mixer of that layer run (in
    `autocast`) on the teacher's recorded input and the teacher's recorded output."""
    errors = {}
    for layer, call in calls.items():
        with autocast:
            y = student.blocks[layer].mixer(call.x, cu_seqlens=call.cu_seqlens)
        errors[layer] = F.mse_loss(y.float(), call.y.float(), reduction=reduction)
    return errors


def piece_call(call: MixerCall, pieces: Pieces) -> MixerCall:
    """The call cut to this rank's piece: x and y (B, T_piece, d_model), the piece's cu_seqlens."""
    return MixerCall(pieces.slice(call.x).contiguous(), pieces.slice(call.y), pieces.local_cu_seqlens(call.x.device))


def alignment_sums(teacher: nn.Module, student: nn.Module, layers: Sequence[int], batch: Batch,
                   autocast=contextlib.nullcontext(), group: ContextGroup | None = None
                   ) -> tuple[dict[int, torch.Tensor], int]:
    """Stage 1 on a batch: ({layer: summed squared error of its mixer's output (0-d, fp32,
    differentiable in the student's mixer)}, the elements each layer's sum runs over); every
    forward in `autocast` (bf16 autocast, precision.py).

    group: a context group: the teacher runs the whole batch (its rows the same on every member),
    each student mixer this rank's piece of the teacher's input under context_parallel, and the
    sums run over the piece (sum them, and their gradients, over the group)."""
    calls = teacher_calls(teacher, layers, batch, autocast)
    split = contextlib.nullcontext()
    if group is not None:
        pieces = piece_of(batch, group)[1]
        calls = {layer: piece_call(call, pieces) for layer, call in calls.items()}
        split = context_parallel(student, pieces)
    with split:
        errors = alignment_errors(student, calls, autocast, reduction="sum")
    return errors, next(iter(calls.values())).y.numel()


@torch.no_grad()
@uncompiled
def heldout_alignment(teacher: nn.Module, student: nn.Module, layers: Sequence[int], task, seq_len: int, samples: int,
                      seed: int, *, batch_size: int = 8, device: torch.device | str = "cpu",
                      autocast=contextlib.nullcontext(), context: Context | None = None) -> dict[str, float]:
    """Each layer's alignment error on `samples` seeded held-out sequences (mse_layer<i>, weighted by
    tokens) and their mean over layers ("loss"), every forward in `autocast`. context: the ranks
    the sequences split over, each on its device (None: this process alone, on `device`)."""
    context = local(device) if context is None else context
    sums = {layer: 0.0 for layer in layers}
    tokens = 0
    with evaluating(teacher, student):
        for batch, counts in heldout_batches(task, seq_len, samples, seed, batch_size=batch_size, context=context):
            count = batch.input_ids.numel()
            errors = alignment_errors(student, teacher_calls(teacher, layers, batch, autocast), autocast)
            if counts:
                for layer, error in errors.items():
                    sums[layer] += error.item() * count
                tokens += count
    *totals, tokens = all_sum([*sums.values(), float(tokens)], context, context.device)
    result = {f"mse_layer{layer}": total / max(tokens, 1) for layer, total in zip(sums, totals)}
    return {"loss": sum(result.values()) / max(len(result), 1), **result}
