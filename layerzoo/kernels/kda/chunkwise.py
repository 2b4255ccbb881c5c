"""KDA chunk by chunk, in PyTorch under autograd: the gated delta rule's WY / UT-transform
algorithm (gated_delta_rule/chunk_forward.py) with a decay per key channel.

Per chunk of C tokens and head, with gc (C, K) the in-chunk cumulative log decay per channel and

    P(x)[i, j] = sum_d x_id k_jd exp(gc_id - gc_jd)   for j <= i, else 0

(the scalar-decay kernels' (x k^T) * L, which no longer factors into a matmul and a mask):

    A = strict_tril(beta_i P(k)_ij);   M = (I + A)^-1
    w = M (beta k exp(gc));  u = M (beta v)
    v_new = u - w S;  S <- diag(exp(gc_last)) S + (k exp(gc_last - gc))^T v_new
    o = scale ((q exp(gc)) S + P(q) v_new)

P is built in blocks of BLOCK tokens, every factor an exp of a span <= 0 so that nothing
overflows however strong the decay: a block of rows i against the earlier columns j factors
through the log decay r at the block's first row, x_i exp(gc_i - r) . k_j exp(r - gc_j), one
matmul; the block against itself takes the exact (BLOCK, BLOCK, K) decays. The gated delta
rule's compiled kernel stays its own: per-channel decays would cost it the matmul-and-mask form
that makes it fast.
"""

from __future__ import annotations

import math

import torch

from ..chunk_layout import from_chunks, to_chunks
from ..chunk_parts import above_diagonal, unit_lower_inverse
from ..common import compute_dtype

# Tokens per block of P: the exact decays cost C * BLOCK * K per chunk, the factored blocks a
# matmul each; 16 is fastest at C = 64 (benchmarks/ssd_kda.py).
BLOCK = 16


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

    q, k: (B, T, H, K); v: (B, T, H, V); g: (B, T, H, K); beta: (B, T, H); T >= 1; initial_state
    (B, H, K, V) or None. Returns o (B, T, H, V) in q's dtype and the final state (B, H, K, V) in
    fp32 (fp64 for fp64 inputs), the dtype all arithmetic runs in. Differentiable in every input.
    """
    batch, length, heads, key_dim = k.shape
    value_dim, out_dtype, dtype = v.shape[-1], q.dtype, compute_dtype(q.dtype)
    chunk = min(chunk_size, length)
    q, k, v, g, beta = (to_chunks(t, chunk, dtype) for t in (q, k, v, g, beta))
    # summed in fp64 so that a short span gc_i - gc_j keeps its digits after a strong decay
    cumulative = g.double().cumsum(-2)
    from_start = cumulative.exp().to(dtype)
    to_end = (cumulative[..., -1:, :] - cumulative).exp().to(dtype)
    scores_k, scores_q = (decayed_scores(x, k, cumulative) for x in (k, q))
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


def decayed_scores(x: torch.Tensor, k: torch.Tensor, cumulative: torch.Tensor) -> torch.Tensor:
    """P(x) (N, BH, C, C): sum_d x_id k_jd exp(gc_id - gc_jd) for j <= i, 0 above the diagonal.

    x, k: (N, BH, C, K); cumulative: gc (N, BH, C, K) in fp64. Rows go in blocks (see BLOCK):
    against the earlier columns through the block's first row's decay, against themselves exactly.
    """
    chunk, dtype = x.shape[-2], x.dtype
    block = chunk if chunk <= BLOCK else math.gcd(chunk, BLOCK)
    rows = []
    for start in range(0, chunk, block):
        end = start + block
        here, reference = cumulative[..., start:end, :], cumulative[..., start:start + 1, :]
        x_here = x[..., start:end, :]
        earlier = torch.matmul(x_here * (here - reference).to(dtype).exp(),
                               (k[..., :start, :] * (reference - cumulative[..., :start, :]).to(dtype).exp()).mT)
        # spans gc_i - gc_j over the block, (block, block, K); above the diagonal exp(-inf) = 0
        span = (here[..., :, None, :] - here[..., None, :, :]).to(dtype)
        decay = span.masked_fill(above_diagonal(block, x.device)[..., None], float("-inf")).exp()
        inside = (x_here[..., :, None, :] * decay * k[..., None, start:end, :]).sum(-1)
        later = x.new_zeros(*x.shape[:-2], block, chunk - end)
        rows.append(torch.cat((earlier, inside, later), dim=-1))
    return torch.cat(rows, dim=-2)
