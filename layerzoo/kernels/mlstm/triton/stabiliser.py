"""The gradient along the max stabiliser's argmax path, which the Triton kernels hold fixed.

Per token m_t = m_{t-1} + log f_t where sigma_t = 1, else m_t = i_t (m_{-1}: the initial m).
h depends on m_t only through the EPS in its denominator (h = q.C~ / (max(|q.n~|, 1) +
EPS exp(m_t)) in unstabilised terms) and the final state through its stored m, so the
gradient reaching m is small and per token; it flows back along the chain of sigma = 1 links
exactly as autograd through torch.maximum in the step loop sends it (ties aside).
"""

from __future__ import annotations

import torch

from ..reference import EPS


def stabiliser_seeds(qn: torch.Tensor, m_tok: torch.Tensor, delta: torch.Tensor) -> torch.Tensor:
    """dL/dm_t through h's EPS term: -EPS (dh_t . h_t) / den_t. All (B*H, T)."""
    den = torch.maximum(qn.abs(), torch.exp(-m_tok)) + EPS
    return -EPS * delta / den


def argmax_path(seeds: torch.Tensor, sigma: torch.Tensor) -> torch.Tensor:
    """G (B*H, T): the total gradient reaching each m_t, G_t = seeds_t + sigma_{t+1} G_{t+1}.

    Vectorised over T: G_t sums seeds_u for t <= u < (the first s > t with sigma_s = 0), a
    difference of two suffix sums, done in fp64 so large and EPS-sized seeds do not cancel.
    """
    length = seeds.shape[-1]
    suffix = seeds.double().flip(-1).cumsum(-1).flip(-1)
    suffix = torch.cat((suffix, suffix.new_zeros(suffix.shape[:-1] + (1,))), dim=-1)
    positions = torch.arange(length, device=seeds.device).expand_as(sigma)
    breaks = torch.where(sigma == 0, positions, length)
    # The first break strictly after t: shift left by one, then a suffix minimum.
    after = torch.cat((breaks[..., 1:], breaks.new_full(breaks.shape[:-1] + (1,), length)), dim=-1)
    next_break = after.flip(-1).cummin(-1).values.flip(-1)
    return (suffix[..., :length] - suffix.gather(-1, next_break)).to(seeds.dtype)
