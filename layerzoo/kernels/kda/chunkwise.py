"""KDA chunk by chunk, in PyTorch under autograd: the gated delta rule's WY / UT-transform
algorithm (gated_delta_rule/chunk_forward.py) with a decay per key channel.

Per chunk of C tokens and head, with gc (C, K) the in-chunk cumulative log decay per channel and

    P(x)[i, j] = sum_d x_id k_jd exp(gc_id - gc_jd)   for j <= i, else 0

(the scalar-decay kernels' (x k^T) * L, which here does not factor into a matmul and a mask):

    A = strict_tril(beta_i P(k)_ij);   M = (I + A)^-1
    w = M (beta k exp(gc));  u = M (beta v)
    v_new = u - w S;  S <- diag(exp(gc_last)) S + (k exp(gc_last - gc))^T v_new
    o = scale ((q exp(gc)) S + P(q) v_new)

P is built by halving the chunk (decayed_scores): every factor is an exp of a span <= 0, so
nothing overflows however strong the decay, and nearly all the work is batched matmuls; autograd
differentiates it. The "native" backend (native.py) runs the same algorithm compiled, a head per
thread, each chunk in cache.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ..common.chunks import from_chunks, to_chunks, unit_lower_inverse
from ..common.dtypes import compute_dtype


def kda_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """KDA with chunks of `chunk_size` tokens (fewer when T is shorter).

    All arithmetic runs in the state's dtype, fp32 (fp64 for fp64 inputs). Differentiable in
    every input. Inputs are not validated here; `kda(...)` validates.

    Args:
        q: (B, T, H, K) queries, any float dtype; T >= 1.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H, K) log decay per key channel (<= 0).
        beta: (B, T, H) write strength.
        scale: the factor on q (the public function's default is K ** -0.5).
        initial_state: (B, H, K, V), or None for zeros.
        chunk_size: tokens per chunk, an int >= 1.

    Returns:
        The pair (o, final_state): o (B, T, H, V) in q's dtype, the state (B, H, K, V) in fp32
            (fp64 for fp64 inputs).
    """
    chunk = min(chunk_size, q.shape[1])
    batch, length, heads, key_dim = k.shape
    value_dim, out_dtype, dtype = v.shape[-1], q.dtype, compute_dtype(q.dtype)
    q, k, v, g, beta = (to_chunks(t, chunk, dtype) for t in (q, k, v, g, beta))
    # summed in fp64 so that a short span gc_i - gc_j keeps its digits after a strong decay; a
    # span rounded to fp32 before exp is off by eps |span| relative, under eps absolute: exp in fp32
    cumulative = g.double().cumsum(-2)
    from_start = cumulative.to(dtype).exp()
    to_end = (cumulative[..., -1:, :] - cumulative).to(dtype).exp()
    scores_k, scores_q = decayed_scores((k, q), k, cumulative)
    beta = beta[..., None]
    inverse = unit_lower_inverse(scores_k * beta)  # reads the strict lower triangle only
    w = torch.matmul(inverse, k * beta * from_start)
    u = torch.matmul(inverse, v * beta)
    k_to_end = (k * to_end).mT
    chunk_decay = from_start[..., -1, :, None]

    state = q.new_zeros(batch * heads, key_dim, value_dim) if initial_state is None \
        else initial_state.to(dtype).reshape(batch * heads, key_dim, value_dim)
    entering, v_new = [], []
    for u_i, w_i, k_i, decay_i in zip(u.unbind(), w.unbind(), k_to_end.unbind(), chunk_decay.unbind()):
        entering.append(state)
        v_new.append(torch.baddbmm(u_i, w_i, state, alpha=-1))
        state = torch.baddbmm(state * decay_i, k_i, v_new[-1])
    out = torch.matmul(q * from_start, torch.stack(entering)) + torch.matmul(scores_q, torch.stack(v_new))
    return from_chunks(out * scale, batch, heads, length).to(out_dtype), state.view(batch, heads, key_dim, value_dim)


def decayed_scores(xs: tuple[torch.Tensor, ...], k: torch.Tensor, cumulative: torch.Tensor) -> list[torch.Tensor]:
    """P(x) (N, BH, C, C) for each x of xs: sum_d x_id k_jd exp(gc_id - gc_jd) for j <= i, 0 above
    the diagonal; the key factors are computed once for all of them.

    xs, k: (N, BH, C, K); cumulative: gc (N, BH, C, K) in fp64. The lower triangle is halved
    recursively, all blocks of a level at once: rows [m, e) against columns [s, m) of a block
    [s, e) factor through the decay at m, the first row of the lower half, as
    (x_i exp(gc_i - gc_m)) . (k_j exp(gc_m - gc_j)): both exponents are <= 0 (g <= 0), so nothing
    overflows however strong the decay. The diagonal is x_i . k_i (no decay). C is padded to a
    power of two with steps that neither decay (g = 0) nor score (k = 0).
    """
    *lead, chunk, key_dim = k.shape
    size = 1 << (chunk - 1).bit_length()
    if size > chunk:  # the padding rows and columns score 0 and are cut off at the end
        xs, k = [F.pad(t, (0, 0, 0, size - chunk)) for t in xs], F.pad(k, (0, 0, 0, size - chunk))
        cumulative = torch.cat((cumulative, cumulative[..., -1:, :].expand(*lead, size - chunk, key_dim)), dim=-2)
    scores = [torch.diag_embed((x * k).sum(-1)) for x in xs]
    half = size // 2
    while half:
        pairs = size // (2 * half)  # blocks [s, e) of 2 * half rows, halves [s, m) and [m, e)
        split = cumulative.view(*lead, pairs, 2, half, key_dim)
        at_m = split[..., 1, :1, :]
        upper_keys = k.view(*lead, pairs, 2, half, key_dim)[..., 0, :, :] * (at_m - split[..., 0, :, :]).to(k.dtype).exp()
        to_lower = (split[..., 1, :, :] - at_m).to(k.dtype).exp()
        for x, score in zip(xs, scores):
            lower = x.view(*lead, pairs, 2, half, key_dim)[..., 1, :, :] * to_lower
            block = torch.matmul(lower, upper_keys.mT)  # (..., pairs, half, half)
            # the blocks of this level are on a diagonal of the grid of (half, half) tiles
            tiles = score.view(*lead, pairs, 2, half, pairs, 2, half)[..., 1, :, :, 0, :]
            torch.diagonal(tiles, dim1=-4, dim2=-2).copy_(block.movedim(-3, -1))
        half //= 2
    return [score[..., :chunk, :chunk] for score in scores]
