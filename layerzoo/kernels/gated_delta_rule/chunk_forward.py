"""The chunkwise gated delta rule's forward: the WY / UT-transform algorithm in plain PyTorch.

Per chunk of C tokens and head, with gc the in-chunk cumulative log decay and L[i, j] =
exp(gc_i - gc_j) for j <= i (see common/chunks.py: decays):

    A = strict_tril(beta_i L_ij k_i . k_j);   M = (I + A)^-1
    w = M (beta k exp(gc));  u = M (beta v)           the delta-rule updates solved in-chunk
    v_new = u - w S;  S <- exp(gc_last) S + (k exp(gc_last - gc))^T v_new
    o = scale ((q exp(gc)) S + (q k^T * L) v_new)

chunkwise.py calls this on groups of chunks: everything but the state is computed for the whole
group at once, then a loop over its chunks carries the (K, V) state with two small matmuls per
chunk, then the group's outputs come from the states the loop kept. It runs without autograd, so
every large tensor is written in place: on CPU a fresh large tensor costs about as much as the
arithmetic on it.
"""

from __future__ import annotations

import torch

from ..common.chunks import decays, unit_lower_inverse


def workspace(like: torch.Tensor, n_chunks: int, chunk: int, key_dim: int, value_dim: int) -> tuple[torch.Tensor, ...]:
    """Uninitialised states (n + 1, BH, K, V), v_new (n, BH, C, V), w (n, BH, C, K) and M
    (n, BH, C, C), in the dtype and on the device of `like` (BH, ...)."""
    heads = like.shape[0]
    return (
        like.new_empty(n_chunks + 1, heads, key_dim, value_dim),
        like.new_empty(n_chunks, heads, chunk, value_dim),
        like.new_empty(n_chunks, heads, chunk, key_dim),
        like.new_empty(n_chunks, heads, chunk, chunk),
    )


def workspace_bytes_per_chunk(heads: int, chunk: int, key_dim: int, value_dim: int, itemsize: int) -> int:
    """What one more chunk adds to a workspace: a state, v_new, w and M."""
    return heads * (key_dim * value_dim + chunk * (value_dim + key_dim + chunk)) * itemsize


def chunk_forward(q, k, v, g, beta, scale, states, v_new, w, inverse) -> torch.Tensor:
    """The forward over a run of N chunks: returns the output (N, BH, C, V) and fills a workspace.

    q, k (N, BH, C, K); v (N, BH, C, V); g, beta (N, BH, C); one dtype. states[0] (BH, K, V) holds
    the state entering the first chunk; the rest of states, v_new, w and M (see workspace) are
    written: what the backward needs.
    """
    chunk, key_dim, value_dim = k.shape[2], k.shape[3], v.shape[3]
    from_start, to_end, inside = decays(g)
    k_beta = k * beta[..., None]
    inverse.copy_(unit_lower_inverse(torch.matmul(k_beta, k.mT).mul_(inside)))
    torch.matmul(inverse, k_beta.mul_(from_start[..., None]), out=w)
    torch.matmul(inverse, v * beta[..., None], out=v_new)  # u, turned into v_new chunk by chunk below
    k_to_end = k.mul(to_end[..., None]).mT
    chunk_decay = from_start[..., -1, None, None]

    # unbind once rather than index per step: five index ops per chunk weigh on so short a loop
    state = states.unbind()
    steps = zip(v_new.unbind(), w.unbind(), k_to_end.unbind(), chunk_decay.unbind())
    for i, (v_new_i, w_i, k_i, decay_i) in enumerate(steps):
        v_new_i.baddbmm_(w_i, state[i], alpha=-1)
        torch.mul(state[i], decay_i, out=state[i + 1]).baddbmm_(k_i, v_new_i)

    q_scaled = q * scale
    out = torch.matmul(torch.matmul(q_scaled, k.mT).mul_(inside), v_new)
    q_scaled.mul_(from_start[..., None])
    # the inter-chunk term for all the group's chunks in one matmul, from the states the loop kept
    out.view(-1, chunk, value_dim).baddbmm_(q_scaled.view(-1, chunk, key_dim), states[:-1].reshape(-1, key_dim, value_dim))
    return out
