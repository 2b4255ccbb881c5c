"""Backward kernels, with every stabiliser m held fixed (the argmax path of m is added outside).

With m fixed the stabilised forward is the unstabilised map times constants, so these are its
exact derivatives. Shapes as in forward.py, plus: dh (B, T, H, Dv); delta (B*H, T) = dh_t . h_t;
dC (B*H, NC+1, Dk, Dv), dn (B*H, NC+1, Dk): entry c is the gradient of the state entering
chunk c (entry 0: of the initial state; entry NC: of the final state, as given).

Per chunk, with dnum_t = dh_t / den_t and dqn_t = -(delta_t / den_t) sign(qn_t) where |qn_t| set
the denominator (else 0), and dP_tj = dnum_t . v_j + dqn_t:

    dq_t = s (alpha_t (C_c dnum_t + n_c dqn_t) + sum_j A_tj dP_tj k_j)
    dk_j = s sum_t A_tj dP_tj q_t + gamma_j (dC_{c+1} v_j + dn_{c+1})
    dv_j = sum_t P_tj dnum_t + gamma_j dC_{c+1}^T k_j
    dC_c = beta dC_{c+1} + sum_t alpha_t s q_t dnum_t^T     (dn_c alike with dqn_t)

(s = SCALE = Dk^-0.5; alpha, A, beta = exp(m_c - M_end), gamma as in forward.py)

and for the gates, since every log-weight is linear in b and i: di_j = k_j . dk_j and
db_t = q_t . dq_t - k_t . dk_t (+ dg at the chunk end), whose reverse cumsum is d log f.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import chunk_gates, denominator, intra_weights, running_max


@triton.jit
def _denominator_grads(qn_ptr, delta_ptr, bh, tok, valid, b, M, T, EPS: tl.constexpr):
    """den_t and dqn_t of one chunk (0 on padding, where delta is 0)."""
    qn = tl.load(qn_ptr + bh * T + tok, mask=valid, other=0.0)
    delta = tl.load(delta_ptr + bh * T + tok, mask=valid, other=0.0)
    den, use_qn = denominator(qn, b + M, EPS)
    dqn = tl.where(use_qn, tl.where(qn >= 0, -delta, delta) / den, 0.0)
    return den, dqn


@triton.jit
def state_grads_kernel(
    q_ptr, dh_ptr, lf_ptr, i_ptr, m_ptr, qn_ptr, delta_ptr, dCf_ptr, dnf_ptr, dC_ptr, dn_ptr,
    T, H, NC,
    Dk: tl.constexpr, Dv: tl.constexpr, L: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr,
    HAS_FINAL_GRAD: tl.constexpr, SCALE: tl.constexpr, EPS: tl.constexpr,
    ACC: tl.constexpr, OP: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (Dk / BK, Dv / BV, B*H): one (BK, BV) tile of dC carried backwards over the chunks."""
    ik, iv, bh = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    batch, head = bh // H, bh % H
    dk = ik * BK + tl.arange(0, BK)
    dv = iv * BV + tl.arange(0, BV)
    tile = dk[:, None] * Dv + dv[None, :]
    tile_mask = (dk[:, None] < Dk) & (dv[None, :] < Dv)
    q_row = q_ptr + batch * T * H * Dk + head * Dk
    dh_row = dh_ptr + batch * T * H * Dv + head * Dv
    if HAS_FINAL_GRAD:
        dC = tl.load(dCf_ptr + bh * Dk * Dv + tile, mask=tile_mask, other=0.0).to(ACC)
        dn = tl.load(dnf_ptr + bh * Dk + dk, mask=dk < Dk, other=0.0).to(ACC)
    else:
        dC = tl.zeros((BK, BV), dtype=ACC)
        dn = tl.zeros((BK,), dtype=ACC)
    for step in range(NC + 1):
        c = NC - step
        state = bh * (NC + 1) + c
        tl.store(dC_ptr + state * Dk * Dv + tile, dC, mask=tile_mask)
        if iv == 0:
            tl.store(dn_ptr + state * Dk + dk, dn, mask=dk < Dk)
        if c > 0:
            # Step back over chunk c - 1, whose entering state is entry c - 1.
            m_in = tl.load(m_ptr + state - 1)
            tok, valid, b, w, g = chunk_gates(lf_ptr + bh * T, i_ptr + bh * T, c - 1, T, L)
            M = running_max(w, m_in, L)
            den, dqn = _denominator_grads(qn_ptr, delta_ptr, bh, tok, valid, b, M, T, EPS)
            alpha = tl.exp(m_in - M) * SCALE
            decay = tl.exp(m_in - tl.maximum(m_in, tl.max(w, axis=0)))
            q = tl.load(q_row + tok[:, None] * (H * Dk) + dk[None, :],
                        mask=valid[:, None] & (dk[None, :] < Dk), other=0.0).to(ACC) * alpha[:, None]
            dnum = tl.load(dh_row + tok[:, None] * (H * Dv) + dv[None, :],
                           mask=valid[:, None] & (dv[None, :] < Dv), other=0.0).to(ACC) / den[:, None]
            q_op, dnum_op = q.to(OP).to(DOT), dnum.to(OP).to(DOT)
            dC = decay * dC + tl.dot(tl.trans(q_op), dnum_op, input_precision=PRECISION, out_dtype=ACC)
            dn = decay * dn + tl.sum(q * dqn[:, None], axis=0)


@triton.jit
def chunk_grads_kernel(
    q_ptr, k_ptr, v_ptr, dh_ptr, lf_ptr, i_ptr, C_ptr, n_ptr, m_ptr, qn_ptr, delta_ptr, dC_ptr, dn_ptr,
    dq_ptr, dk_ptr, dv_ptr, dlf_ptr, di_ptr,
    T, H, NC, B,
    Dk: tl.constexpr, Dv: tl.constexpr, L: tl.constexpr, BK: tl.constexpr, BV: tl.constexpr, NV: tl.constexpr,
    SCALE: tl.constexpr, EPS: tl.constexpr,
    ACC: tl.constexpr, OP: tl.constexpr, DOT: tl.constexpr, PRECISION: tl.constexpr,
):
    """Grid (Dk / BK, NC, B*H): dq, dk of one chunk's (L, BK) tile, looping over Dv tiles.

    dv, d log f and di are sums over Dk, so each Dk tile writes its own share: dv_ptr is
    (Dk / BK, B, T, H, Dv), dlf_ptr and di_ptr (Dk / BK, B*H, T), summed by the caller (a no-op
    view when one tile covers Dk). q.k^T is likewise this tile's share, which is all dv needs.
    """
    ik, c, bh = tl.program_id(0).to(tl.int64), tl.program_id(1), tl.program_id(2).to(tl.int64)
    batch, head = bh // H, bh % H
    idx = tl.arange(0, L)
    dk = ik * BK + tl.arange(0, BK)
    state = bh * (NC + 1) + c
    tok, valid, b, w, g = chunk_gates(lf_ptr + bh * T, i_ptr + bh * T, c, T, L)
    m_in = tl.load(m_ptr + state)
    M = running_max(w, m_in, L)
    M_end = tl.maximum(m_in, tl.max(w, axis=0))
    den, dqn = _denominator_grads(qn_ptr, delta_ptr, bh, tok, valid, b, M, T, EPS)
    alpha = tl.exp(m_in - M) * SCALE
    decay = tl.exp(m_in - M_end)
    gamma = tl.exp(w - M_end)

    # Only the dot operands stay live through the Dv loop (registers are the limit here); the
    # fp32 views of q, k and the (L, L) weights A are rebuilt after it.
    qk_offsets = batch * T * H * Dk + head * Dk + tok[:, None] * (H * Dk) + dk[None, :]
    qk_mask = valid[:, None] & (dk[None, :] < Dk)
    q_op = tl.load(q_ptr + qk_offsets, mask=qk_mask, other=0.0).to(OP).to(DOT)
    k_op = tl.load(k_ptr + qk_offsets, mask=qk_mask, other=0.0).to(OP).to(DOT)
    P = tl.dot(q_op, tl.trans(k_op), input_precision=PRECISION, out_dtype=ACC) * SCALE
    P_op = (P * intra_weights(w, M, L)).to(OP).to(DOT)
    k_gamma = (k_op.to(ACC) * gamma[:, None]).to(OP).to(DOT)

    dP = tl.zeros((L, L), dtype=ACC)  # dnum V^T
    dq_state = tl.zeros((L, BK), dtype=ACC)  # dnum C_c^T
    dk_state = tl.zeros((L, BK), dtype=ACC)  # V dC_{c+1}^T
    C_dot_dC = tl.zeros((BK,), dtype=ACC)
    for iv in range(NV):
        dv = iv * BV + tl.arange(0, BV)
        hv_offsets = batch * T * H * Dv + head * Dv + tok[:, None] * (H * Dv) + dv[None, :]
        hv_mask = valid[:, None] & (dv[None, :] < Dv)
        tile = dk[:, None] * Dv + dv[None, :]
        tile_mask = (dk[:, None] < Dk) & (dv[None, :] < Dv)
        v = tl.load(v_ptr + hv_offsets, mask=hv_mask, other=0.0).to(OP).to(DOT)
        dnum = tl.load(dh_ptr + hv_offsets, mask=hv_mask, other=0.0).to(ACC) / den[:, None]
        C = tl.load(C_ptr + state * Dk * Dv + tile, mask=tile_mask, other=0.0)
        dC = tl.load(dC_ptr + (state + 1) * Dk * Dv + tile, mask=tile_mask, other=0.0)
        dnum_op, C_op, dC_op = dnum.to(OP).to(DOT), C.to(OP).to(DOT), dC.to(OP).to(DOT)
        dP += tl.dot(dnum_op, tl.trans(v), input_precision=PRECISION, out_dtype=ACC)
        dq_state += tl.dot(dnum_op, tl.trans(C_op), input_precision=PRECISION, out_dtype=ACC)
        dk_state += tl.dot(v, tl.trans(dC_op), input_precision=PRECISION, out_dtype=ACC)
        dv_tile = tl.dot(tl.trans(P_op), dnum_op, input_precision=PRECISION, out_dtype=ACC)
        dv_tile += tl.dot(k_gamma, dC_op, input_precision=PRECISION, out_dtype=ACC)
        tl.store(dv_ptr + ik * B * T * H * Dv + hv_offsets, dv_tile, mask=hv_mask)
        C_dot_dC += tl.sum(C * dC, axis=1)

    n = tl.load(n_ptr + state * Dk + dk, mask=dk < Dk, other=0.0)
    dn = tl.load(dn_ptr + (state + 1) * Dk + dk, mask=dk < Dk, other=0.0)
    # A is 0 above the diagonal and in padded columns.
    dS = ((dP + dqn[:, None]) * intra_weights(w, M, L)).to(OP).to(DOT)
    dq = alpha[:, None] * (dq_state + dqn[:, None] * n[None, :])
    dq += tl.dot(dS, k_op, input_precision=PRECISION, out_dtype=ACC) * SCALE
    dk_state = gamma[:, None] * (dk_state + dn[None, :])
    dk_all = dk_state + tl.dot(tl.trans(dS), q_op, input_precision=PRECISION, out_dtype=ACC) * SCALE
    tl.store(dq_ptr + qk_offsets, dq, mask=qk_mask)
    tl.store(dk_ptr + qk_offsets, dk_all, mask=qk_mask)

    # Gates: this Dk tile's share of di_j = k_j . dk_j and of d log f. The chunk-end decay g
    # scales C_c (via beta) and every write to C_{c+1} (via gamma): its gradient is dg.
    q, k = q_op.to(ACC), k_op.to(ACC)  # exact: q and k were OP values to begin with
    k_dk = tl.sum(k * dk_all, axis=1)
    dg = decay * tl.sum(C_dot_dC + n * dn, axis=0) + tl.sum(k * dk_state)
    db = tl.sum(q * dq, axis=1) - k_dk + tl.where(idx == L - 1, dg, 0.0)
    dlf = tl.cumsum(db, axis=0, reverse=True)
    tl.store(dlf_ptr + (ik * B * H + bh) * T + tok, dlf, mask=valid)
    tl.store(di_ptr + (ik * B * H + bh) * T + tok, k_dk, mask=valid)
