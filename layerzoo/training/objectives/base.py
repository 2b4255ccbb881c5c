"""What the training loop trains: an objective owns a model, the loss of a step and a held-out
measure; the loop owns everything around them (schedules, the optimizer step, logs, checkpoints,
stop signals)."""

from __future__ import annotations

from typing import Protocol

from torch import nn


class Objective(Protocol):
    """A training objective.

    `model` is what the optimizer trains and the checkpoints hold (the parameters that require
    gradients are trained). The loop calls `backward` once a step, then clips and steps the
    optimizer, and calls `heldout` at the steps that measure.
    """

    model: nn.Module

    def backward(self, step: int, seq_len: int) -> tuple[float, dict[str, float]]:
        """Draw step `step`'s examples of `seq_len` tokens from the run's seed (so a resumed run
        draws the same ones), run them forward and backward (gradients accumulate in `model`),
        and return the step's loss and the values logged beside it."""
        ...

    def heldout(self) -> dict[str, float]:
        """Measures on held-out examples (the same ones every call), logged as eval_<key>;
        "loss" first."""
        ...
