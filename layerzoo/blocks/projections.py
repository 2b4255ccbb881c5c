"""How the zoo's projections and short convolutions draw their weights.

Two rules, chosen per model (a spec's `model.projection_init`):
  uniform  PyTorch's nn.Linear / nn.Conv1d default, U(±1/sqrt(fan_in)) for weights and biases:
           the default, and what fla's layers and mamba_ssm's Mamba-2 draw by themselves.
  normal   weights N(0, std), biases 0: what transformers' and fla's models draw (std 0.02 by
           default, the model's `init_std`).

The two agree near fan_in 830 and differ several-fold at the tiny specs' width, where neither
is better everywhere: language modelling on text leaves the unigram plateau far sooner with
`normal`, while the NIAH main job learns its task with `uniform` and not with `normal` in the
same steps (docs/results.md, "Why the text hybrids started slowly").

A module takes the rule in force when it is constructed and keeps it, so that re-running its
`reset_parameters()` later (a meta-device build, weights missing from a checkpoint) draws by the
same rule. The rule in force is the default, or what `projection_init(...)` sets around a
construction (CausalLM sets its config's around its blocks):

    with projection_init("normal", std=0.02):
        mixer = GatedDeltaNet(64, n_heads=2)
"""

from __future__ import annotations

import contextlib
import math
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Iterator

import torch
from torch import nn

PROJECTION_INITS = ("uniform", "normal")


@dataclass(frozen=True)
class ProjectionInit:
    """A rule (one of PROJECTION_INITS) and, for `normal`, the weights' standard deviation."""

    rule: str = "uniform"
    std: float = 0.02

    def __post_init__(self):
        if self.rule not in PROJECTION_INITS:
            raise ValueError(f"projection init must be one of {PROJECTION_INITS}, got {self.rule!r}")
        if not self.std > 0:
            raise ValueError(f"projection init std must be > 0, got {self.std}")

    def draw(self, weight: torch.Tensor, bias: torch.Tensor | None, fan_in: int) -> None:
        """Set weight (and bias) in place by this rule."""
        if weight.is_meta:  # no values to set: a model built on the meta device draws once allocated
            return
        with torch.no_grad():
            if self.rule == "normal":
                nn.init.normal_(weight, std=self.std)
                if bias is not None:
                    nn.init.zeros_(bias)
                return
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
            nn.init.uniform_(weight, -bound, bound)
            if bias is not None:
                nn.init.uniform_(bias, -bound, bound)


_in_force: ContextVar[ProjectionInit] = ContextVar("projection_init", default=ProjectionInit())


def current_projection_init() -> ProjectionInit:
    """The rule a projection constructed now takes."""
    return _in_force.get()


@contextlib.contextmanager
def projection_init(rule: str, std: float = 0.02) -> Iterator[ProjectionInit]:
    """Within the block, constructed projections and short convolutions draw by `rule`."""
    token = _in_force.set(ProjectionInit(rule, std))
    try:
        yield _in_force.get()
    finally:
        _in_force.reset(token)


class Linear(nn.Linear):
    """nn.Linear whose weights are drawn by the projection rule in force at its construction.

    x: (..., in_features) -> (..., out_features), as nn.Linear; its state dict is nn.Linear's.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, **factory):
        self.init = current_projection_init()  # before nn.Linear's constructor calls reset_parameters
        super().__init__(in_features, out_features, bias, **factory)

    def reset_parameters(self) -> None:
        self.init.draw(self.weight, self.bias, self.in_features)
