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


def alignment_errors(student: nn.Module, calls: dict[int, MixerCall], autocast=contextlib.nullcontext()
                     ) -> dict[int, torch.Tensor]:
    """{layer: mean squared error (0-d, fp32, differentiable in the student's mixer)} between the
    student's mixer of that layer run (in `autocast`) on the teacher's recorded input and the
    teacher's recorded output."""
    errors = {}
    for layer, call in calls.items():
        with autocast:
            y = student.blocks[layer].mixer(call.x, cu_seqlens=call.cu_seqlens)
        errors[layer] = F.mse_loss(y.float(), call.y.float())
    return errors


def alignment_loss(teacher: nn.Module, student: nn.Module, layers: Sequence[int], batch: Batch,
                   autocast=contextlib.nullcontext()) -> tuple[torch.Tensor, dict[str, float]]:
    """Stage 1's loss on a batch: the mean over layers of their alignment errors (0-d), and each
    layer's error to log as mse_layer<i>; every forward in `autocast` (bf16 autocast, precision.py)."""
    errors = alignment_errors(student, teacher_calls(teacher, layers, batch, autocast), autocast)
    loss = torch.stack(list(errors.values())).mean()
    return loss, {f"mse_layer{layer}": error.item() for layer, error in errors.items()}


@torch.no_grad()
@uncompiled
def heldout_alignment(teacher: nn.Module, student: nn.Module, layers: Sequence[int], task, seq_len: int, samples: int,
                      seed: int, *, batch_size: int = 8, device: torch.device | str = "cpu",
                      autocast=contextlib.nullcontext()) -> dict[str, float]:
    """Each layer's alignment error on `samples` seeded held-out sequences (mse_layer<i>, weighted by
    tokens) and their mean over layers ("loss"), every forward in `autocast`."""
    sums = {layer: 0.0 for layer in layers}
    tokens = 0
    with evaluating(teacher, student):
        for batch, _ in heldout_batches(task, seq_len, samples, seed, batch_size=batch_size, context=local(device)):
            count = batch.input_ids.numel()
            for layer, error in alignment_errors(student, teacher_calls(teacher, layers, batch, autocast), autocast).items():
                sums[layer] += error.item() * count
            tokens += count
    result = {f"mse_layer{layer}": total / max(tokens, 1) for layer, total in sums.items()}
    return {"loss": sum(result.values()) / max(len(result), 1), **result}
