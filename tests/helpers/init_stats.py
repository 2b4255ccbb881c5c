"""Is a freshly initialised tensor drawn from a given distribution? A one-sample Kolmogorov-Smirnov
test against the distribution's CDF, in torch (scipy is no test dependency).

The bound is the asymptotic KS critical value at significance 1e-4, c = 2.15 / sqrt(n): a right
init fails once in ten thousand seeds, and the tests draw fixed seeds, so they never flake.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

from .ks import normal, one_sample_statistic as ks_statistic, uniform as uniform_cdf

KS_CRITICAL = 2.15  # sqrt(-ln(alpha / 2) / 2) at alpha = 1e-4


def normal_cdf(std: float, mean: float = 0.0) -> Callable[[torch.Tensor], torch.Tensor]:
    return normal(mean, std)


def follows(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor]) -> bool:
    return ks_statistic(sample, cdf) <= KS_CRITICAL / math.sqrt(sample.numel())


def assert_follows(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor], what: str) -> None:
    statistic, bound = ks_statistic(sample, cdf), KS_CRITICAL / math.sqrt(sample.numel())
    assert statistic <= bound, f"{what}: KS statistic {statistic:.4f} > {bound:.4f} (n = {sample.numel()})"


def linear_default_cdf(fan_in: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """nn.Linear's default weight init, kaiming_uniform_(a=sqrt(5)): U(-1/sqrt(fan_in), 1/sqrt(fan_in))."""
    bound = 1 / math.sqrt(fan_in)
    return uniform_cdf(-bound, bound)
