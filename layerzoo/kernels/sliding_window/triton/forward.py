"""Forward kernel: one program per (query block, batch * head), online softmax over in-window keys.

Grid (cdiv(Tq, BLOCK_M), B * H). The program for query block [m0, m0 + BLOCK_M) of head h reads
kv head h // GROUP (GQA without repeating k/v) and visits only the key blocks of
common.key_block_range: up to the window edge of its first query and up to the diagonal of its
last one. The element mask is applied only on the straddling blocks at either end of that range;
the blocks in between are visible for every pair and run unmasked.

Writes out (B, Tq, H, D) and lse (B, H, Tq) fp32, the log2-domain log-sum-exp of each row's
scaled scores, which the backward uses to recompute probabilities without a second max pass.
"""

from __future__ import annotations

import triton
import triton.language as tl

from .common import dot, key_block_range, load_rows, store_rows, visible


@triton.jit
def _attend_key_blocks(
    acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
    pos_q, offs_n, offs_d, lo, hi, Tk, W, D, qk_scale,
    MASK: tl.constexpr, EVEN_D: tl.constexpr, BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """Fold key blocks [lo, hi) into the running (acc, l_i, m_i) of one query block."""
    for n0 in range(lo, hi, BLOCK_N):
        pos_k = n0 + offs_n
        # Only masked blocks can reach past Tk (unmasked ones end at or before the first query).
        k = load_rows(k_base, pos_k, stride_kt, offs_d, stride_kd, Tk, D, MASK, EVEN_D)
        s = dot(q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32), PRECISION, UPCAST)
        s = s * qk_scale
        if MASK:
            s = tl.where(visible(pos_q[:, None], pos_k[None, :], W), s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # m_i starts finite (not -inf), so a row whose first blocks are all masked gets
        # alpha = exp2(0) and p = 0 here instead of exp2(-inf + inf) = NaN.
        alpha = tl.math.exp2(m_i - m_new)
        p = tl.math.exp2(s - m_new[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_rows(v_base, pos_k, stride_vt, offs_d, stride_vd, Tk, D, MASK, EVEN_D)
        acc = dot(p.to(v.dtype), v, acc * alpha[:, None], PRECISION, UPCAST)
        m_i = m_new
    return acc, l_i, m_i


@triton.jit
def swa_fwd_kernel(
    Q, K, V, O, LSE,
    stride_qb, stride_qt, stride_qh, stride_qd,
    stride_kb, stride_kt, stride_kh, stride_kd,
    stride_vb, stride_vt, stride_vh, stride_vd,
    stride_ob, stride_ot, stride_oh, stride_od,
    H, Tq, Tk, W, D, qk_scale, tune_key,
    GROUP: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    EVEN_D: tl.constexpr, PRECISION: tl.constexpr, UPCAST: tl.constexpr,
):
    """out[b, i, h] = softmax over visible keys of q . k * scale, applied to v.

    W is the window (Tk when unbounded), qk_scale = scale * log2(e), tune_key only keys the
    autotuner. Rows >= Tq are padding: computed on zeros, never stored.
    """
    pid_m = tl.program_id(0)
    pid_bh = tl.program_id(1)
    b = (pid_bh // H).to(tl.int64)
    h = (pid_bh % H).to(tl.int64)
    hk = h // GROUP
    q_base = Q + b * stride_qb + h * stride_qh
    k_base = K + b * stride_kb + hk * stride_kh
    v_base = V + b * stride_vb + hk * stride_vh

    m0 = pid_m * BLOCK_M
    offs_m = m0 + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, BLOCK_D)
    pos_q = Tk - Tq + offs_m

    q = load_rows(q_base, offs_m, stride_qt, offs_d, stride_qd, Tq, D, True, EVEN_D)
    acc = tl.zeros([BLOCK_M, BLOCK_D], tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    m_i = tl.full([BLOCK_M], -1.0e30, tl.float32)

    start, full_lo, full_hi, end = key_block_range(m0, Tq, Tk, W, BLOCK_M, BLOCK_N)
    acc, l_i, m_i = _attend_key_blocks(
        acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, start, full_lo, Tk, W, D, qk_scale,
        True, EVEN_D, BLOCK_N, PRECISION, UPCAST)
    acc, l_i, m_i = _attend_key_blocks(
        acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, full_lo, full_hi, Tk, W, D, qk_scale,
        False, EVEN_D, BLOCK_N, PRECISION, UPCAST)
    acc, l_i, m_i = _attend_key_blocks(
        acc, l_i, m_i, q, k_base, v_base, stride_kt, stride_vt, stride_kd, stride_vd,
        pos_q, offs_n, offs_d, full_hi, end, Tk, W, D, qk_scale,
        True, EVEN_D, BLOCK_N, PRECISION, UPCAST)

    # Every real row sees at least its own key, so l_i > 0 there; padding rows may not.
    l_safe = tl.where(l_i > 0.0, l_i, 1.0)
    o_base = O + b * stride_ob + h * stride_oh
    store_rows(o_base, offs_m, stride_ot, offs_d, stride_od, Tq, D, acc / l_safe[:, None], EVEN_D)
    tl.store(LSE + pid_bh.to(tl.int64) * Tq + offs_m, m_i + tl.math.log2(l_safe), mask=offs_m < Tq)
