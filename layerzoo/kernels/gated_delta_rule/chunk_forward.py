"""The chunkwise gated delta rule's forward: the WY / UT-transform algorithm in plain PyTorch.

Per chunk of C tokens and head, with gc the in-chunk cumulative log decay and L[i, j] =
exp(gc_i - gc_j) for j <= i (see chunk_parts.decays):

    A = strict_tril(beta_i L_ij k_i . k_j);   M = (I + A)^-1
    w = M (beta k exp(gc));  u = M (beta v)           the delta-rule updates solved in-chunk
    v_new = u - w S;  S <- exp(gc_last) S + (k exp(gc_last - gc))^T v_new
    o = scale ((q exp(gc)) S + (q k^T * L) v_new)

Everything but the state is computed for all chunks at once; a loop over the N chunks carries
the (K, V) state with two small matmuls per chunk. It runs without autograd (see chunkwise.py),
so every large tensor is written in place: on CPU a fresh large tensor costs about as much as
the arithmetic on it.
"""

from __future__ import annotations

import torch

from .chunk_parts import decays, unit_lower_inverse


def chunk_forward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
    scale: float, initial_state: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """q, k (N, BH, C, K); v (N, BH, C, V); g, beta (N, BH, C); initial_state (BH, K, V); one dtype.

    Returns the output (N, BH, C, V) and what the backward needs: the state entering every
    chunk and the final one (N + 1, BH, K, V), v_new (N, BH, C, V), w (N, BH, C, K) and M
    (N, BH, C, C).
    """
    n_chunks, heads, chunk, key_dim = k.shape
    value_dim = v.shape[-1]
    from_start, to_end, inside = decays(g)
    k_beta = k * beta[..., None]
    inverse = unit_lower_inverse(torch.matmul(k_beta, k.mT).mul_(inside))
    w = inverse @ k_beta.mul_(from_start[..., None])
    v_new = inverse @ (v * beta[..., None])  # u, turned into v_new chunk by chunk below
    k_to_end = k.mul(to_end[..., None]).mT
    chunk_decay = from_start[..., -1, None, None]

    states = k.new_empty(n_chunks + 1, heads, key_dim, value_dim)
    states[0] = initial_state
    # unbind once rather than index per step: 64 chunks x 5 tensors of views cost ~10% of the loop
    state = states.unbind()
    steps = zip(v_new.unbind(), w.unbind(), k_to_end.unbind(), chunk_decay.unbind())
    for i, (v_new_i, w_i, k_i, decay_i) in enumerate(steps):
        v_new_i.baddbmm_(w_i, state[i], alpha=-1)
        torch.mul(state[i], decay_i, out=state[i + 1]).baddbmm_(k_i, v_new_i)

    q_scaled = q * scale
    out = torch.matmul(torch.matmul(q_scaled, k.mT).mul_(inside), v_new)
    q_scaled.mul_(from_start[..., None])
    # the inter-chunk term for all chunks in one matmul, from the states the loop kept
    out.view(-1, chunk, value_dim).baddbmm_(q_scaled.view(-1, chunk, key_dim), states[:-1].view(-1, key_dim, value_dim))
    return out, states, v_new, w, inverse
