"""DPFP, the deterministic parameter-free projection ARMT uses as its feature map phi."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.dtypes import compute_dtype

NU = 3  # ARMT's setting: key width 2 * NU * d


def dpfp(x: torch.Tensor, nu: int = NU) -> torch.Tensor:
    """x: (..., d) -> (..., 2 * nu * d), non-negative.

    r = cat(relu(x), relu(-x)); phi = cat(r, ..., r) * cat(roll(r, 1), ..., roll(r, nu)):
    every product r_i * r_(i - j mod 2d) for j = 1..nu.

    Args:
        x: (..., d), any float dtype.
        nu: the rolls taken, NU (3, ARMT's) by default.

    Returns:
        (..., 2 * nu * d) in x's dtype, non-negative.
    """
    r = torch.cat((F.relu(x), F.relu(-x)), dim=-1)
    rolled = torch.cat([r.roll(shift, dims=-1) for shift in range(1, nu + 1)], dim=-1)
    return torch.cat([r] * nu, dim=-1) * rolled


def features(x: torch.Tensor, normalize: bool) -> torch.Tensor:
    """phi(x), L2-normalised over the last dimension when `normalize`: (..., d) -> (..., 2 * NU * d).

    Computed in fp32 at least (fp64 stays fp64): the memory accumulates these in fp32.

    Args:
        x: (..., d) projections, any float dtype.
        normalize: L2-normalise phi(x) over its last dimension.

    Returns:
        (..., 2 * NU * d) in fp32 (fp64 for fp64 x).
    """
    phi = dpfp(x.to(compute_dtype(x.dtype)))
    return F.normalize(phi, dim=-1) if normalize else phi
