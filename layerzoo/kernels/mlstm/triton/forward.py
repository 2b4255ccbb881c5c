"""Forward kernels: the chunk-boundary states (sequential over chunks), then every chunk's outputs.

Shapes (all contiguous): q, k (B, T, H, Dk); v, h (B, T, H, Dv); gates lf, i (B*H, T);
states C (B*H, NC+1, Dk, Dv), n (B*H, NC+1, Dk), m (B*H, NC+1): entry c is the state entering
chunk c, entry NC the final state. Per token (B*H, T): qn (q.n of the output's denominator),
m (the token's stabiliser) and sigma (1 where m_t came from m_{t-1} + log f_t, 0 where from i_t),
which the backward needs to send gradients along the max stabiliser's argmax path.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import chunk_gates, denominator, intra_weights, running_max


@triton.jit
def chunk_states_kernel(
    k_ptr, v_ptr, lf_ptr, i_ptr, C0_ptr, n0_ptr, m0_ptr, C_ptr, n_ptr, m_ptr,
    T, H, NC,
    Dk: tl.constexpr, Dv: tl.constexpr, L: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_INITIAL: tl.constexpr,
    ACC: tl.constexpr, OP: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (Dk / BK, Dv / BV, B*H): one (BK, BV) tile of C (and BK of n) carried over all chunks.

    Per chunk, with M = max(m, max_j w_j): C <- exp(m - M) C + sum_j exp(w_j - M) k_j v_j^T and
    m <- g + M (the recurrent m after the chunk's last token). Every program keeps m (a few
    scalar ops per chunk) so no tile waits on another; one program stores it.
    """
    ik, iv, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    batch, head = bh // H, bh % H
    dk = ik * BK + tl.arange(0, BK)
    dv = iv * BV + tl.arange(0, BV)
    k_row = k_ptr + batch * T * H * Dk + head * Dk
    v_row = v_ptr + batch * T * H * Dv + head * Dv
    tile = dk[:, None] * Dv + dv[None, :]
    tile_mask = (dk[:, None] < Dk) & (dv[None, :] < Dv)
    if HAS_INITIAL:
        C = tl.load(C0_ptr + bh * Dk * Dv + tile, mask=tile_mask, other=0.0).to(ACC)
        n = tl.load(n0_ptr + bh * Dk + dk, mask=dk < Dk, other=0.0).to(ACC)
    else:
        C = tl.zeros((BK, BV), dtype=ACC)
        n = tl.zeros((BK,), dtype=ACC)
    # Always a tensor (zeros for the empty state, as in the reference): a loop-carried scalar
    # needs one type from the start.
    m = tl.load(m0_ptr + bh).to(ACC)
    for c in range(NC + 1):
        state = bh * (NC + 1) + c
        tl.store(C_ptr + state * Dk * Dv + tile, C, mask=tile_mask)
        if iv == 0:
            tl.store(n_ptr + state * Dk + dk, n, mask=dk < Dk)
            if ik == 0:
                tl.store(m_ptr + state, m)
        if c < NC:
            tok, valid, b, w, g = chunk_gates(lf_ptr + bh * T, i_ptr + bh * T, c, T, L)
            M = tl.maximum(m, tl.max(w, axis=0))
            gamma = tl.exp(w - M)  # 0 on padding (w = -inf)
            k = tl.load(k_row + tok[:, None] * (H * Dk) + dk[None, :],
                        mask=valid[:, None] & (dk[None, :] < Dk), other=0.0).to(ACC)
            v = tl.load(v_row + tok[:, None] * (H * Dv) + dv[None, :],
                        mask=valid[:, None] & (dv[None, :] < Dv), other=0.0).to(OP).to(DOT)
            k = k * gamma[:, None]
            decay = tl.exp(m - M)
            k_op = k.to(OP).to(DOT)
            C = decay * C + tl.dot(tl.trans(k_op), v, input_precision=PRECISION, out_dtype=ACC)
            n = decay * n + tl.sum(k, axis=0)
            m = g + M


@triton.jit
def chunk_outputs_kernel(
    q_ptr, k_ptr, v_ptr, lf_ptr, i_ptr, C_ptr, n_ptr, m_ptr, h_ptr, qn_ptr, mt_ptr, sigma_ptr,
    T, H, NC,
    Dk: tl.constexpr, Dv: tl.constexpr, L: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NK: tl.constexpr,
    SCALE: tl.constexpr, EPS: tl.constexpr,
    ACC: tl.constexpr, OP: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (Dv / BV, NC, B*H): h for one chunk's L tokens and BV value columns, all chunks at once.

    h_t = (alpha_t q_t C_c + sum_{j<=t} A_tj (q_t.k_j) v_j) / den_t with alpha_t = exp(m_c - M_t),
    A_tj = exp(w_j - M_t) and the same sums with n / ones for q.n; q.k^T, q C_c and q.n_c are
    accumulated over Dk tiles. The iv == 0 program also stores the per-token qn, m and sigma.
    """
    iv, c, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    batch, head = bh // H, bh % H
    dv = iv * BV + tl.arange(0, BV)
    state = bh * (NC + 1) + c
    tok, valid, b, w, g = chunk_gates(lf_ptr + bh * T, i_ptr + bh * T, c, T, L)
    q_row = q_ptr + batch * T * H * Dk + head * Dk
    k_row = k_ptr + batch * T * H * Dk + head * Dk

    scores = tl.zeros((L, L), dtype=ACC)
    q_C = tl.zeros((L, BV), dtype=ACC)
    q_n = tl.zeros((L,), dtype=ACC)
    for ik in range(NK):
        dk = ik * BK + tl.arange(0, BK)
        qk_mask = valid[:, None] & (dk[None, :] < Dk)
        q = tl.load(q_row + tok[:, None] * (H * Dk) + dk[None, :], mask=qk_mask, other=0.0).to(OP).to(DOT)
        k = tl.load(k_row + tok[:, None] * (H * Dk) + dk[None, :], mask=qk_mask, other=0.0).to(OP).to(DOT)
        C = tl.load(C_ptr + state * Dk * Dv + dk[:, None] * Dv + dv[None, :],
                    mask=(dk[:, None] < Dk) & (dv[None, :] < Dv), other=0.0)
        n = tl.load(n_ptr + state * Dk + dk, mask=dk < Dk, other=0.0)
        scores += tl.dot(q, tl.trans(k), input_precision=PRECISION, out_dtype=ACC)
        q_C += tl.dot(q, C.to(OP).to(DOT), input_precision=PRECISION, out_dtype=ACC)
        q_n += tl.sum(q.to(ACC) * n[None, :], axis=1)

    m_in = tl.load(m_ptr + state)
    M = running_max(w, m_in, L)
    alpha = tl.exp(m_in - M) * SCALE
    P = scores * SCALE * intra_weights(w, M, L)
    v = tl.load(v_ptr + batch * T * H * Dv + head * Dv + tok[:, None] * (H * Dv) + dv[None, :],
                mask=valid[:, None] & (dv[None, :] < Dv), other=0.0).to(OP).to(DOT)
    P_op = P.to(OP).to(DOT)
    numerator = alpha[:, None] * q_C + tl.dot(P_op, v, input_precision=PRECISION, out_dtype=ACC)
    qn = alpha * q_n + tl.sum(P, axis=1)
    m_tok = b + M
    den, _ = denominator(qn, m_tok, EPS)
    h = numerator / den[:, None]
    tl.store(h_ptr + batch * T * H * Dv + head * Dv + tok[:, None] * (H * Dv) + dv[None, :],
             h.to(h_ptr.dtype.element_ty), mask=valid[:, None] & (dv[None, :] < Dv))
    if iv == 0:
        tl.store(qn_ptr + bh * T + tok, qn, mask=valid)
        tl.store(mt_ptr + bh * T + tok, m_tok, mask=valid)
        # Token t set its own m (sigma 0) when w_t reached the running max.
        tl.store(sigma_ptr + bh * T + tok, tl.where(w < M, 1.0, 0.0).to(ACC), mask=valid)
