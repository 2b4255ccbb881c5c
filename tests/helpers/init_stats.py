"""Is a freshly initialised tensor drawn from a given distribution? A one-sample Kolmogorov-Smirnov
test against the distribution's CDF, in torch (scipy is no test dependency).

The bound is the asymptotic KS critical value at significance 1e-4, c = 2.15 / sqrt(n): a right
init fails once in ten thousand seeds, and the tests draw fixed seeds, so they never flake.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

KS_CRITICAL = 2.15  # sqrt(-ln(alpha / 2) / 2) at alpha = 1e-4


def normal_cdf(std: float, mean: float = 0.0) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: 0.5 * (1 + torch.erf((x - mean) / (std * math.sqrt(2))))


def uniform_cdf(low: float, high: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: ((x - low) / (high - low)).clamp(0, 1)


def ks_statistic(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """sup |empirical CDF - cdf| of the flattened sample."""
    x = sample.detach().double().flatten().sort().values
    n = x.numel()
    at = cdf(x)
    above = torch.arange(1, n + 1, dtype=torch.float64) / n - at
    below = at - torch.arange(0, n, dtype=torch.float64) / n
    return max(above.max().item(), below.max().item())


def follows(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    return ks_statistic(sample, cdf) <= KS_CRITICAL / math.sqrt(sample.numel())


def assert_follows(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor], what: str) -> None:
    statistic, bound = ks_statistic(sample, cdf), KS_CRITICAL / math.sqrt(sample.numel())
    assert statistic <= bound, f"{what}: KS statistic {statistic:.4f} > {bound:.4f} (n = {sample.numel()})"


def linear_default_cdf(fan_in: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """nn.Linear's default weight init, kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1 / math.sqrt(fan_in)
    return uniform_cdf(-bound, bound)
