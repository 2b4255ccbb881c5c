"""What every mLSTM Triton kernel shares: the per-chunk gate algebra (jit helpers).

Layout of the gates the kernels read: lf = logsigmoid(f) and i, both (B*H, T) in the compute dtype,
so one (batch, head) row is contiguous. Tokens past T (the last chunk's padding) load as
lf = 0 and i = -inf: they neither forget nor write, so padding never reaches the state.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def chunk_gates(lf_row, i_row, c, T, L: tl.constexpr):
    """Token indices and gate algebra of chunk c of one (batch, head) row.

    Returns tok (L,) absolute token indices, valid (L,) tok < T, b (L,) the inclusive cumsum of
    log forget gates from the chunk start, w (L,) = i - b the log write weight measured from the
    chunk start (-inf on padding), and g = b at the chunk end (taken from b itself, not a second
    sum, so every kernel rounds the chunk-end stabiliser identically).
    """
    idx = tl.arange(0, L)
    tok = c * L + idx
    valid = tok < T
    lf = tl.load(lf_row + tok, mask=valid, other=0.0)
    ig = tl.load(i_row + tok, mask=valid, other=float("-inf"))
    b = tl.cumsum(lf, axis=0)
    w = ig - b
    g = tl.sum(tl.where(idx == L - 1, b, 0.0), axis=0)
    return tok, valid, b, w, g


@triton.jit
def running_max(w, m_in, L: tl.constexpr):
    """M (L,): max(m_in, w_0..w_t) per token t; the token's stabiliser is m_t = b_t + M_t.

    This is exactly the recurrent m_t = max(m_{t-1} + log f_t, i_t) unrolled from the chunk
    start. A masked (L, L) row max rather than a scan: the kernels build (L, L) tiles anyway.
    """
    idx = tl.arange(0, L)
    causal = idx[:, None] >= idx[None, :]
    z = tl.max(tl.where(causal, w[None, :], float("-inf")), axis=1)
    return tl.maximum(z, m_in)


@triton.jit
def intra_weights(w, M, L: tl.constexpr):
    """A (L, L): exp(w_j - M_t) for j <= t, else 0; token j's weight in token t's output.

    The exponent is masked before exp, so j > t never makes an inf (and no 0 * inf later).
    """
    idx = tl.arange(0, L)
    causal = idx[:, None] >= idx[None, :]
    return tl.exp(tl.where(causal, w[None, :] - M[:, None], float("-inf")))


@triton.jit
def denominator(qn, m, EPS: tl.constexpr):
    """max(|q.n|, exp(-m)) + EPS per token, and whether |q.n| is the branch taken."""
    floor = tl.exp(-m)
    use_qn = tl.abs(qn) > floor
    return tl.where(use_qn, tl.abs(qn), floor) + EPS, use_qn
