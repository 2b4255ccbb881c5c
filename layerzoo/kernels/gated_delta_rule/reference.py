"""The gated delta rule as a step loop over time: the slow, obviously-correct truth."""

from __future__ import annotations

import torch

from ..common.dtypes import compute_dtype


def gated_delta_rule_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One token at a time, per head, state S (K, V):

        S = exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)

    Arithmetic runs in the state dtype, fp32 (fp64 for fp64 inputs). Inputs are not validated
    here; `gated_delta_rule(..., backend="reference")` validates.

    Args:
        q: (B, T, H, K) queries, any float dtype.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H) log decay (<= 0); or (B, T, H, K), a decay per key channel,
            S = diag(exp(g_t)) S: KDA's recurrence.
        beta: (B, T, H) write strength.
        scale: the factor on q; None: K ** -0.5.
        initial_state: (B, H, K, V), or None for zeros.

    Returns:
        The pair (o, final_state): o (B, T, H, V) in q's dtype, the state (B, H, K, V) in fp32
            (fp64 for fp64 inputs).
    """
    batch, length, heads, key_dim = k.shape
    out_dtype, dtype = q.dtype, compute_dtype(q.dtype)
    scale = key_dim**-0.5 if scale is None else scale
    q, k, v, g, beta = (t.to(dtype) for t in (q, k, v, g, beta))
    g = g[..., None] if g.dim() == 3 else g  # (B, T, H, 1 or K): decays the state's rows
    if initial_state is None:
        state = q.new_zeros(batch, heads, key_dim, v.shape[-1])
    else:
        state = initial_state.to(dtype)
    outputs = []
    # unbind, not indexing with [:, t]: the backward of each index op would fill a zero tensor as
    # large as the whole input, making the backward quadratic in T.
    for q_t, k_t, v_t, g_t, beta_t in zip(*(t.unbind(1) for t in (q, k, v, g, beta))):
        state = state * g_t.exp()[..., None]
        u = beta_t[..., None] * (v_t - torch.einsum("bhkv,bhk->bhv", state, k_t))
        state = state + k_t[..., :, None] * u[..., None, :]
        outputs.append(torch.einsum("bhkv,bhk->bhv", state, q_t * scale))
    out = torch.stack(outputs, dim=1) if outputs else v.new_zeros(batch, 0, heads, v.shape[-1])
    return out.to(out_dtype), state
