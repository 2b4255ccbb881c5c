"""The initialisation of Mamba-2's decay gate, which Gated DeltaNet, Mamba-2 and KDA share.

Per step a head (or channel) decays by exp(-A dt), dt = softplus(a + dt_bias) from the input's
projection a. A is drawn uniform over a range and stored as A_log; dt_bias is set so that at
a = 0 the step dt is log-uniform in [dt_min, dt_max]. The per-step decay then spreads over orders
of magnitude across heads: some forget within a token, others keep thousands. Both are rates,
not weights: they stay out of weight decay (1-d).
"""

from __future__ import annotations

import math

import torch


def init_decay_rate(A_log: torch.Tensor, low: float, high: float) -> None:
    """A_log = log(A), A ~ U(low, high), in place."""
    with torch.no_grad():
        A_log.copy_(torch.empty_like(A_log).uniform_(low, high).log())


def init_time_step_bias(dt_bias: torch.Tensor, dt_min: float = 1e-3, dt_max: float = 0.1, floor: float = 1e-4) -> None:
    """dt_bias = softplus^-1(dt), dt log-uniform in [dt_min, dt_max] (at least `floor`), in place."""
    with torch.no_grad():
        low, high = math.log(dt_min), math.log(dt_max)
        dt = torch.exp(torch.rand_like(dt_bias) * (high - low) + low).clamp(min=floor)
        dt_bias.copy_(dt + torch.log(-torch.expm1(-dt)))
