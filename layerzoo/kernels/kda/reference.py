"""KDA (the delta rule with a decay per key channel) as a step loop: the truth.

It is the gated delta rule's step loop with the decay applied per row of the state, which that
loop takes (gated_delta_rule/reference.py), so the two families share one truth.
"""

from __future__ import annotations

import torch

from ..gated_delta_rule.reference import gated_delta_rule_reference


def kda_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token at a time, per head, state S (K, V):

        S = diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)

    Inputs are not validated here; `kda(..., backend="reference")` validates.

    Args:
        q: (B, T, H, K) queries, any float dtype.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H, K) log decay per key channel (<= 0).
        beta: (B, T, H) write strength.
        scale: the factor on q; None: K ** -0.5.
        initial_state: (B, H, K, V), or None for zeros.

    Returns:
        The pair (o, final_state): o (B, T, H, V) in q's dtype, the state (B, H, K, V) in fp32
            (fp64 for fp64 inputs).
    """
    return gated_delta_rule_reference(q, k, v, g, beta, scale, initial_state)
