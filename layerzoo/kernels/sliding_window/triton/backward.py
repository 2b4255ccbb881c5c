"""The backward kernels: delta = rowsum(dO * O), then dK/dV per key block and dQ per query block.

delta is sum_j p_ij dp_ij, the softmax-Jacobian term, computed once per row instead of per block;
its kernel and the dQ kernel use the forward's grid (cdiv(Tq, BLOCK_M), B * H).

dK/dV: one program per (key block, batch * kv head), grid (cdiv(Tk - key_start, BLOCK_N), B * Hkv),
key_start = first_key rounded down to BLOCK_N, the first block any window reaches (keys before it
get zero gradients, written by the launcher). The program keeps its key block's k, v and the fp32
dK, dV accumulators on chip and, for each query head of its GQA group in turn, visits only the
query blocks of common.query_block_range: from the diagonal to where the window stops reaching the
block. Summing the group's heads inside one program is why GQA needs no atomics and no
(B, Tk, H, D) partials: each dK/dV row has exactly one writer. It works transposed (key rows x
query columns) so the accumulators are plain dot outputs:
    pT = exp2(k q^T * scale * log2 e - lse),  dV += pT dO,  dsT = pT * (v dO^T - delta),  dK += dsT q.

dQ: one program per query block reloads its queries' q, dO, lse and delta once and walks the same
in-window key blocks as the forward (common.key_block_range), masked only at the window and causal
edges:
    p = exp2(q k^T * scale * log2 e - lse),  ds = p * (dO v^T - delta),  dQ = scale * ds k.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import dot, key_block_range, load_rows, query_block_range, store_rows, visible


@triton.jit
def swa_bwd_delta_kernel(
    O, DO, DELTA,
    stride_ob, stride_ot, stride_oh, stride_od,
    stride_dob, stride_dot, stride_doh, stride_dod,
    H, Tq, D,
    BLOCK_M: tl.constexpr, BLOCK_D: tl.constexpr, EVEN_D: tl.constexpr,
):
    """delta (B, H, Tq) fp32 = sum over d of dO * O, in fp32 whatever their dtype."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)
    o = load_rows(O + b * stride_ob + h * stride_oh, rows, stride_ot, offs_d, stride_od,
                  Tq, D, True, EVEN_D)
    do = load_rows(DO + b * stride_dob + h * stride_doh, rows, stride_dot, offs_d, stride_dod,
                   Tq, D, True, EVEN_D)
    delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
    tl.store(DELTA + pid_bh.to(tl.int64) * Tq + rows, delta, mask=rows < Tq)


@triton.jit
def _accumulate_query_blocks(
    dk, dv, k, v, q_base, do_base, lse_base, delta_base,
    stride_qt, stride_qd, stride_dot, stride_dod,
    pos_k, offs_m, offs_d, lo, hi, Tq, Tk, W, D, qk_scale,
    MASK: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_M: tl.constexpr,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """Add query blocks [lo, hi) of one query head to the key block's (dk, dv)."""
    for m0 in range(lo, hi, BLOCK_M):
        rows = m0 + offs_m
        # Only masked blocks can include the Tq tail; padding rows load zeros, which add nothing.
        q = load_rows(q_base, rows, stride_qt, offs_d, stride_qd, Tq, D, MASK, EVEN_D)
        do = load_rows(do_base, rows, stride_dot, offs_d, stride_dod, Tq, D, MASK, EVEN_D)
        if MASK:
            lse = tl.load(lse_base + rows, mask=rows < Tq, other=0.0)
            delta = tl.load(delta_base + rows, mask=rows < Tq, other=0.0)
        else:
            lse = tl.load(lse_base + rows)
            delta = tl.load(delta_base + rows)
        s_t = dot(k, tl.trans(q), tl.zeros([k.shape[0], BLOCK_M], tl.float32), PRECISION, UPCAST)
        p_t = tl.math.exp2(s_t * qk_scale - lse[None, :])
        if MASK:
            pos_q = Tk - Tq + rows
            keep = visible(pos_q[None, :], pos_k[:, None], W) & (rows[None, :] < Tq)
            p_t = tl.where(keep, p_t, 0.0)
        dv = dot(p_t.to(do.dtype), do, dv, PRECISION, UPCAST)
        dp_t = dot(v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], tl.float32), PRECISION, UPCAST)
        ds_t = p_t * (dp_t - delta[None, :])
        dk = dot(ds_t.to(q.dtype), q, dk, PRECISION, UPCAST)
    return dk, dv


@triton.jit
def swa_bwd_dkdv_kernel(
    Q, K, V, DO, DK, DV, LSE, DELTA,
    stride_qb, stride_qt, stride_qh, stride_qd,
    stride_kb, stride_kt, stride_kh, stride_kd,
    stride_vb, stride_vt, stride_vh, stride_vd,
    stride_dob, stride_dot, stride_doh, stride_dod,
    stride_dkb, stride_dkt, stride_dkh, stride_dkd,
    stride_dvb, stride_dvt, stride_dvh, stride_dvd,
    H, Hkv, Tq, Tk, W, D, first_key, sm_scale, qk_scale, tune_key,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """dK, dV (B, Tk, Hkv, D) rows of key block pid, counted from first_key's block."""
    pid_n = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // Hkv).to(tl.int64)
    hk = (pid_bh % Hkv).to(tl.int64)
    n0 = (first_key // BLOCK_N + pid_n) * BLOCK_N
    pos_k = n0 + tl.arange(0, BLOCK_N)
    offs_m = tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, BLOCK_D)

    k = load_rows(K + b * stride_kb + hk * stride_kh, pos_k, stride_kt, offs_d, stride_kd,
                  Tk, D, True, EVEN_D)
    v = load_rows(V + b * stride_vb + hk * stride_vh, pos_k, stride_vt, offs_d, stride_vd,
                  Tk, D, True, EVEN_D)
    dk = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)
    dv = tl.zeros([BLOCK_N, BLOCK_D], tl.float32)

    start, full_lo, full_hi, end = query_block_range(n0, Tq, Tk, W, BLOCK_M, BLOCK_N)
    for g in range(GROUP):
        h = hk * GROUP + g
        q_base = Q + b * stride_qb + h * stride_qh
        do_base = DO + b * stride_dob + h * stride_doh
        lse_base = LSE + (b * H + h) * Tq
        delta_base = DELTA + (b * H + h) * Tq
        dk, dv = _accumulate_query_blocks(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qt, stride_qd, stride_dot, stride_dod,
            pos_k, offs_m, offs_d, start, full_lo, Tq, Tk, W, D, qk_scale,
            True, EVEN_D, BLOCK_M, PRECISION, UPCAST)
        dk, dv = _accumulate_query_blocks(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qt, stride_qd, stride_dot, stride_dod,
            pos_k, offs_m, offs_d, full_lo, full_hi, Tq, Tk, W, D, qk_scale,
            False, EVEN_D, BLOCK_M, PRECISION, UPCAST)
        dk, dv = _accumulate_query_blocks(
            dk, dv, k, v, q_base, do_base, lse_base, delta_base,
            stride_qt, stride_qd, stride_dot, stride_dod,
            pos_k, offs_m, offs_d, full_hi, end, Tq, Tk, W, D, qk_scale,
            True, EVEN_D, BLOCK_M, PRECISION, UPCAST)

    store_rows(DK + b * stride_dkb + hk * stride_dkh, pos_k, stride_dkt, offs_d, stride_dkd,
               Tk, D, dk * sm_scale, EVEN_D)
    store_rows(DV + b * stride_dvb + hk * stride_dvh, pos_k, stride_dvt, offs_d, stride_dvd,
               Tk, D, dv, EVEN_D)


@triton.jit
def _accumulate_key_blocks(
    dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
    pos_q, offs_n, offs_d, lo, hi, Tk, W, D, qk_scale,
    MASK: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """Add key blocks [lo, hi) to one query block's dq (before the final * scale)."""
    for n0 in range(lo, hi, BLOCK_N):
        pos_k = n0 + offs_n
        k = load_rows(k_base, pos_k, stride_kt, offs_d, stride_kd, Tk, D, MASK, EVEN_D)
        v = load_rows(v_base, pos_k, stride_vt, offs_d, stride_vd, Tk, D, MASK, EVEN_D)
        s = dot(q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32), PRECISION, UPCAST)
        p = tl.math.exp2(s * qk_scale - lse[:, None])
        if MASK:
            p = tl.where(visible(pos_q[:, None], pos_k[None, :], W), p, 0.0)
        dp = dot(do, tl.trans(v), tl.zeros([q.shape[0], BLOCK_N], tl.float32), PRECISION, UPCAST)
        ds = p * (dp - delta[:, None])
        dq = dot(ds.to(k.dtype), k, dq, PRECISION, UPCAST)
    return dq


@triton.jit
def swa_bwd_dq_kernel(
    Q, K, V, DO, DQ, LSE, DELTA,
    stride_qb, stride_qt, stride_qh, stride_qd,
    stride_kb, stride_kt, stride_kh, stride_kd,
    stride_vb, stride_vt, stride_vh, stride_vd,
    stride_dob, stride_dot, stride_doh, stride_dod,
    stride_dqb, stride_dqt, stride_dqh, stride_dqd,
    H, Tq, Tk, W, D, sm_scale, qk_scale, tune_key,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """dQ (B, Tq, H, D) for query rows [pid * BLOCK_M, ...) of one (batch, head)."""
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    hk = h // GROUP
    m0 = pid_m * BLOCK_M
    rows = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    pos_q = Tk - Tq + rows

    q = load_rows(Q + b * stride_qb + h * stride_qh, rows, stride_qt, offs_d, stride_qd,
                  Tq, D, True, EVEN_D)
    do = load_rows(DO + b * stride_dob + h * stride_doh, rows, stride_dot, offs_d, stride_dod,
                   Tq, D, True, EVEN_D)
    # Padding rows read lse = delta = 0 with q = dO = 0, so their p is finite and ds is 0.
    lse = tl.load(LSE + pid_bh.to(tl.int64) * Tq + rows, mask=rows < Tq, other=0.0)
    delta = tl.load(DELTA + pid_bh.to(tl.int64) * Tq + rows, mask=rows < Tq, other=0.0)
    k_base = K + b * stride_kb + hk * stride_kh
    v_base = V + b * stride_vb + hk * stride_vh
    dq = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)

    start, full_lo, full_hi, end = key_block_range(m0, Tq, Tk, W, BLOCK_M, BLOCK_N)
    dq = _accumulate_key_blocks(
        dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, start, full_lo, Tk, W, D, qk_scale,
        True, EVEN_D, BLOCK_N, PRECISION, UPCAST)
    dq = _accumulate_key_blocks(
        dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, full_lo, full_hi, Tk, W, D, qk_scale,
        False, EVEN_D, BLOCK_N, PRECISION, UPCAST)
    dq = _accumulate_key_blocks(
        dq, q, do, lse, delta, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, full_hi, end, Tk, W, D, qk_scale,
        True, EVEN_D, BLOCK_N, PRECISION, UPCAST)

    store_rows(DQ + b * stride_dqb + h * stride_dqh, rows, stride_dqt, offs_d, stride_dqd,
               Tq, D, dq * sm_scale, EVEN_D)
