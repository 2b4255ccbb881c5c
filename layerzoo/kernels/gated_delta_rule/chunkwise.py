"""The gated delta rule chunk by chunk in plain PyTorch (the WY / UT-transform algorithm).

Within a chunk of C tokens the delta-rule updates are a unit lower-triangular system, solved for
all chunks at once, as is everything else that does not depend on the state. Only the (K, V)
state crosses chunk boundaries: a Python loop over the T / C chunks carries it, with four small
matmuls per chunk. With gc the in-chunk cumulative log decay and L[i, j] = exp(gc_i - gc_j) for
j <= i (0 above the diagonal), per chunk and head:

    A = strict_tril(beta_i L_ij k_i . k_j);   (I + A) [w | u] = [beta k exp(gc) | beta v]
    v_new = u - w S;   o = scale (q exp(gc)) S + (scale q k^T * L) v_new
    S <- exp(gc_last) S + (k exp(gc_last - gc))^T v_new

The outputs are computed in the loop, each chunk's from the state at its start, rather than
batched afterwards: that would stack every chunk's state and copy more large tensors, and on CPU
large copies (page faults included) cost as much as the matmuls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .reference import compute_dtype


def _chunks(t: torch.Tensor, chunk: int, n_chunks: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, T, H, *rest) -> contiguous (N, B * H, C, *rest) in `dtype`, zero-padded to N * C steps.

    Chunk-major, so that the loop over chunks reads contiguous slices and every matmul folds its
    batch dimensions without copying. Zero padding is inert: a padded step has beta = 0 and
    k = 0, so it writes nothing to the state, and g = 0, so it decays nothing.
    """
    batch, length, heads, *rest = t.shape
    t = t.to(dtype)
    if n_chunks * chunk > length:
        t = F.pad(t, [0, 0] * len(rest) + [0, 0, 0, n_chunks * chunk - length])
    t = t.view(batch, n_chunks, chunk, heads, *rest).transpose(2, 3).transpose(0, 1)
    # reshape alone returns a strided view when B = 1, and then every matmul on it would make its
    # own contiguous copy: one copy here instead.
    return t.reshape(n_chunks, batch * heads, chunk, *rest).contiguous()


def _decays(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per chunk from log decays g (..., C): exp(gc), exp(gc_last - gc) and L (..., C, C).

    Sums over spans are taken directly, never as differences of cumulative sums: with very
    negative gates a cumulative sum is large and subtracting two of them loses every digit of
    the small span between them.
    """
    chunk = g.shape[-1]
    from_start = g.cumsum(-1)
    # exclusive reverse cumulative sum: the decay from step i (excluded) to the chunk end
    to_end = F.pad(g[..., 1:].flip(-1).cumsum(-1).flip(-1), (0, 1))
    ones = torch.ones(chunk, chunk, dtype=torch.bool, device=g.device)
    # span[i, j] = g_{j+1} + ... + g_i for j <= i: a cumulative sum down the columns of a matrix
    # whose row l holds g_l where l > j. Above the diagonal span is 0, so exp cannot overflow.
    span = torch.where(ones.tril(-1), g[..., :, None], 0).cumsum(-2)
    # In place (cumsum's backward does not need its output): these are the largest tensors here
    # and on CPU every fresh one costs as much as the arithmetic on it.
    inside = span.masked_fill_(~ones.tril(), -torch.inf).exp()
    return from_start.exp(), to_end.exp(), inside


def chunkwise_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule with chunks of `chunk_size` tokens (fewer when T is shorter).

    q, k: (B, T, H, K); v: (B, T, H, V); g, beta: (B, T, H); T >= 1; initial_state (B, H, K, V)
    or None. Returns o (B, T, H, V) in q's dtype and the final state (B, H, K, V) in fp32 (fp64
    for fp64 inputs), the dtype all arithmetic runs in. Differentiable in every input.
    """
    batch, length, heads, key_dim = k.shape
    value_dim = v.shape[-1]
    out_dtype, dtype = q.dtype, compute_dtype(q.dtype)
    chunk = min(chunk_size, length)
    n_chunks = -(-length // chunk)
    q, k, v, g, beta = (_chunks(t, chunk, n_chunks, dtype) for t in (q, k, v, g, beta))

    from_start, to_end, inside = _decays(g)
    k_beta = k * beta[..., None]
    a = (k_beta @ k.transpose(-1, -2)) * inside
    # (I + A)^-1 once per chunk, then two matmuls: cheaper than solving for K + V right-hand
    # sides. unitriangular: the solver reads only the strict lower triangle of `a`.
    eye = torch.eye(chunk, dtype=dtype, device=a.device).expand_as(a)
    inverse = torch.linalg.solve_triangular(a, eye, upper=False, unitriangular=True)
    w = inverse @ (k_beta * from_start[..., None])
    u = inverse @ (v * beta[..., None])
    k_to_end = (k * to_end[..., None]).transpose(-1, -2)
    chunk_decay = from_start[..., -1, None, None]

    q_from_start = q * (scale * from_start)[..., None]
    # alpha folds the scale into the product instead of another pass over q
    scores = torch.baddbmm(q.new_zeros(()), q.flatten(0, 1), k.flatten(0, 1).transpose(-1, -2), beta=0, alpha=scale)
    scores = scores.view_as(inside) * inside

    if initial_state is None:
        state = q.new_zeros(batch * heads, key_dim, value_dim)
    else:
        state = initial_state.to(dtype).reshape(batch * heads, key_dim, value_dim)
    outputs = []
    # unbind, not indexing: the backward of t[i] writes into a zero tensor as large as t, which
    # makes the backward quadratic in T; unbind's backward stacks all chunks' gradients once.
    for u_i, w_i, k_i, decay_i, q_i, scores_i in zip(
        u.unbind(), w.unbind(), k_to_end.unbind(), chunk_decay.unbind(), q_from_start.unbind(), scores.unbind()
    ):
        v_new = torch.baddbmm(u_i, w_i, state, alpha=-1)  # u - w S
        out = torch.baddbmm(scores_i @ v_new, q_i, state)
        # (B * H, C, V) -> (B, C, H, V), so that one cat writes the output in its final layout
        outputs.append(out.view(batch, heads, chunk, value_dim).transpose(1, 2))
        state = torch.baddbmm(state * decay_i, k_i, v_new)
    out = torch.cat(outputs, dim=1)[:, :length]
    return out.to(out_dtype), state.view(batch, heads, key_dim, value_dim)
