"""Kolmogorov-Smirnov tests in torch alone (the test extra has no scipy): whether initial weights are
drawn from a stated distribution, or from the same one as a counterpart's.

p-values from the asymptotic Kolmogorov distribution with Stephens' small-sample correction
(Numerical Recipes, `kstwo`): good to a few per cent for samples of tens and more, which is all a
verdict at p = 1e-3 needs.
"""

from __future__ import annotations

import math
from typing import Callable

import torch

P_MIN = 1e-3


def _p_value(statistic: float, effective_n: float) -> float:
    root = math.sqrt(effective_n)
    lam = (root + 0.12 + 0.11 / root) * statistic
    if lam < 0.2:
        return 1.0
    return min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam) for k in range(1, 101))))


def one_sample_statistic(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """sup |empirical CDF - cdf| of the flattened sample (cdf: fp64 in, fp64 out)."""
    x = sample.detach().double().flatten().sort().values
    n = x.numel()
    f = cdf(x)
    ranks = torch.arange(n + 1, dtype=torch.float64) / n
    return torch.maximum(ranks[1:] - f, f - ranks[:-1]).max().item()


def two_sample_statistic(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest gap between the empirical CDFs of two flattened samples."""
    a, b = a.detach().double().flatten().sort().values, b.detach().double().flatten().sort().values
    both = torch.cat((a, b))
    fa = torch.searchsorted(a, both, right=True) / a.numel()
    fb = torch.searchsorted(b, both, right=True) / b.numel()
    return (fa - fb).abs().max().item()


def ks_one_sample(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor]) -> float:
    """p-value of the sample (any shape) against a distribution's cdf (fp64 in, fp64 out)."""
    return _p_value(one_sample_statistic(sample, cdf), sample.numel())


def ks_two_sample(a: torch.Tensor, b: torch.Tensor) -> float:
    """p-value of two samples (any shapes) being drawn from one distribution."""
    return _p_value(two_sample_statistic(a, b), a.numel() * b.numel() / (a.numel() + b.numel()))


def uniform(low: float, high: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: ((x - low) / (high - low)).clamp(0, 1)


def normal(mean: float, std: float) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: 0.5 * (1 + torch.erf((x - mean) / (std * math.sqrt(2))))


def assert_drawn_from(sample: torch.Tensor, cdf: Callable[[torch.Tensor], torch.Tensor], what: str) -> None:
    p = ks_one_sample(sample, cdf)
    assert p > P_MIN, f"{what}: KS p = {p:.2e}"


def assert_same_distribution(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    p = ks_two_sample(a, b)
    assert p > P_MIN, f"{what}: KS p = {p:.2e}"
