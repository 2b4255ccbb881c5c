"""Two samples drawn from one distribution or not: the two-sample Kolmogorov-Smirnov test, for
comparing initialisations whose draws differ but whose distributions should not."""

from __future__ import annotations

import math

import torch

from .ks import two_sample_statistic as kolmogorov_smirnov


def ks_critical_value(n: int, m: int) -> float:
    """The statistic above which two samples of n and m values differ at alpha = 1e-3 (asymptotic)."""
    return 1.95 * math.sqrt((n + m) / (n * m))


def same_distribution(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a KS test at alpha = 1e-3 keeps that a and b are drawn from one distribution."""
    return kolmogorov_smirnov(a, b) < ks_critical_value(a.numel(), b.numel())


class Law:
    """A distribution to test initialisations against: `draw(n)` draws n values (float64, from a
    fixed seed); a constant law holds one value, and samples of it must equal it exactly."""

    def __init__(self, name: str, draw=None, constant: float | None = None):
        self.name, self._draw, self.constant = name, draw, constant

    def draw(self, n: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(1234)
        if self.constant is not None:
            return torch.full((n,), self.constant, dtype=torch.float64)
        return self._draw(n, generator)

    def __repr__(self) -> str:
        return self.name


def uniform(low: float, high: float) -> Law:
    return Law(f"U({low:g}, {high:g})",
               lambda n, g: torch.rand(n, generator=g, dtype=torch.float64) * (high - low) + low)


def log_of_uniform(low: float, high: float) -> Law:
    """log A, A ~ U(low, high) (the A_log of decay rates)."""
    base = uniform(low, high)
    return Law(f"log {base.name}", lambda n, g: base._draw(n, g).log())


def normal(std: float) -> Law:
    return Law(f"N(0, {std:g}^2)", lambda n, g: torch.randn(n, generator=g, dtype=torch.float64) * std)


def inverse_softplus_of_log_uniform(low: float = 1e-3, high: float = 0.1, floor: float = 1e-4) -> Law:
    """softplus^-1(dt), dt log-uniform in [low, high], at least floor (Mamba-2's dt_bias)."""
    def draw(n, g):
        dt = torch.exp(torch.rand(n, generator=g, dtype=torch.float64) * (math.log(high) - math.log(low))
                       + math.log(low)).clamp(min=floor)
        return dt + torch.log(-torch.expm1(-dt))
    return Law(f"softplus^-1(log-uniform dt in [{low:g}, {high:g}])", draw)


def constant(value: float) -> Law:
    return Law(f"= {value:g}", constant=value)


def assert_drawn_from(sample: torch.Tensor, law: Law, what: str) -> None:
    """sample equals a constant law exactly, or passes a KS test at alpha = 1e-3 against a draw of
    the law's as large."""
    if law.constant is not None:
        assert bool((sample == law.constant).all()), f"{what}: not all {law}"
        return
    reference = law.draw(max(sample.numel(), 2000))
    statistic = kolmogorov_smirnov(sample, reference)
    assert statistic < ks_critical_value(sample.numel(), reference.numel()), \
        f"{what}: not drawn from {law} (KS statistic {statistic:.3f} over {sample.numel()} values)"
