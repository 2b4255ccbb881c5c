"""Per-step schedules: learning rate (warmup + cosine) and the SWA window (fixed or stochastic).

Both are pure functions of the step (and the run seed), so a resumed run and every
data-parallel rank see the same values without sharing any state.
"""

from __future__ import annotations

import math

from ...tasks import example_seed
from ..config import OptimizerConfig, WindowConfig


def learning_rate(step: int, total_steps: int, config: OptimizerConfig) -> float:
    """Linear warmup over warmup_steps, then cosine decay to min_lr_ratio * lr at total_steps."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, total_steps - config.warmup_steps)
    cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return config.lr * (config.min_lr_ratio + (1 - config.min_lr_ratio) * cosine)


class WindowSchedule:
    """window(step) -> the window every SWA layer uses at that step, or None to keep the spec's.

    stochastic (SWAX): short with probability p_short, else long; the last anneal_fraction of the
    steps use long only, so the model ends trained for the window it is evaluated at.
    """

    def __init__(self, config: WindowConfig, total_steps: int, seed: int):
        self.config = config
        self.total_steps = total_steps
        self.seed = seed
        self.anneal_start = math.ceil(total_steps * (1 - config.anneal_fraction))

    def window(self, step: int) -> int | None:
        config = self.config
        if config.schedule == "fixed" or step >= self.anneal_start:
            return config.long
        draw = example_seed(self.seed, "window", step) / 2**63  # uniform in [0, 1)
        return config.short if draw < config.p_short else config.long

    @property
    def eval_window(self) -> int | None:
        return self.config.long
