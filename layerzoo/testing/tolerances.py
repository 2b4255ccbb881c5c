"""Comparing tensors the way kernels are compared: relative RMS error plus an absolute floor."""

from __future__ import annotations

import torch

# (relative RMS tolerance, absolute RMS floor) per dtype of the computation under test.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float64: (1e-10, 1e-12),
    torch.float32: (1e-5, 1e-6),
    torch.bfloat16: (3e-2, 1e-3),
    torch.float16: (5e-3, 1e-4),
}


def rms(x: torch.Tensor) -> float:
    return x.double().pow(2).mean().sqrt().item() if x.numel() else 0.0


def relative_rms_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """rms(actual - expected) / rms(expected).

    Args:
        actual: any tensor.
        expected: a tensor of actual's shape.

    Returns:
        The error, computed in fp64 (rms(expected) floored at 1e-30).
    """
    return rms(actual.double() - expected.double()) / max(rms(expected), 1e-30)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, dtype: torch.dtype | None = None,
                 what: str = "tensor", scale: float = 1.0, magnitude: float = 0.0) -> None:
    """Pass when rms(actual - expected) <= rtol * max(rms(expected), magnitude) + atol for
    `dtype`'s tolerances.

    scale multiplies both tolerances (gradients, which sum many rounding errors, use a few times
    the output tolerance). magnitude, when given, is the size of the terms that `expected` sums:
    a result that cancels to far less than its terms keeps their rounding error. NaN or Inf
    anywhere fails.

    Args:
        actual: the tensor under test.
        expected: what it should be, of actual's shape (an fp64 reference, say).
        dtype: the dtype whose TOLERANCES apply; None: actual's.
        what: names the tensor in the error.
        scale: the factor on both tolerances.
        magnitude: the size of the terms expected sums; 0: rms(expected) alone.

    Raises:
        AssertionError: the shapes differ, actual holds NaN or Inf, or the error exceeds the bound.
    """
    if actual.shape != expected.shape:
        raise AssertionError(f"{what}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}")
    if not torch.isfinite(actual).all():
        raise AssertionError(f"{what}: has NaN or Inf")
    rtol, atol = TOLERANCES[dtype or actual.dtype]
    error = rms(actual.double() - expected.double())
    bound = scale * (rtol * max(rms(expected), magnitude) + atol)
    if error > bound:
        raise AssertionError(
            f"{what}: rms error {error:.3e} > {bound:.3e} (relative {relative_rms_error(actual, expected):.3e}, dtype {dtype or actual.dtype})"
        )
