"""Triton helpers shared by the forward and backward kernels: tile loads, the dot, block ranges.

Scores live in the log2 domain (scores * scale * log2(e)) so the kernels use exp2, and the
saved log-sum-exp is in that domain too; it never leaves this package.

Block ranges: query i sits at key position p = Tk - Tq + i and sees keys s with
p - W < s <= p. A range is four block-aligned bounds (start, full_lo, full_hi, end): blocks in
[start, full_lo) and [full_hi, end) straddle a window or causal edge (or a length tail) and need
the element mask; blocks in [full_lo, full_hi) are visible for every real pair and skip it.
Blocks before `start` or from `end` on are never loaded, which is what makes the kernels
O(T * window) rather than O(Tq * Tk). All operands stay non-negative, so Triton's truncating
division equals floor division (the tests check a Python copy of the ranges against the mask).
"""

from __future__ import annotations

import triton
import triton.language as tl

LOG2E = 1.4426950408889634


@triton.jit
def dot(a, b, acc, PRECISION: tl.constexpr, UPCAST: tl.constexpr):
    """acc + a @ b with fp32 accumulation.

    PRECISION is "tf32x3" (GPU) or "ieee" (interpreter) for fp32 inputs, where plain tl.dot would
    round them to TF32 (~1e-3 relative error), and "tf32" (ignored) for 16-bit ones. UPCAST works around the Triton
    interpreter, whose dot multiplies bf16 tiles as their raw uint16 bits; bf16 -> fp32 is exact,
    so the result is what the tensor cores compute.
    """
    if UPCAST:
        a = a.to(tl.float32)
        b = b.to(tl.float32)
    return tl.dot(a, b, acc, input_precision=PRECISION)


@triton.jit
def load_rows(base, rows, stride_t, offs_d, stride_d, n_rows, D,
              CHECK_ROWS: tl.constexpr, EVEN_D: tl.constexpr):
    """A (len(rows), BLOCK_D) tile of a (T, D) slice; rows >= n_rows and columns >= D read 0.

    Zero padding keeps padded rows harmless: their scores are 0 (finite) and their values and
    output gradients add nothing to any real row's sums.
    """
    ptrs = base + rows[:, None] * stride_t + offs_d[None, :] * stride_d
    if CHECK_ROWS:
        if EVEN_D:
            tile = tl.load(ptrs, mask=rows[:, None] < n_rows, other=0.0)
        else:
            tile = tl.load(ptrs, mask=(rows[:, None] < n_rows) & (offs_d[None, :] < D), other=0.0)
    else:
        if EVEN_D:
            tile = tl.load(ptrs)
        else:
            tile = tl.load(ptrs, mask=offs_d[None, :] < D, other=0.0)
    return tile


@triton.jit
def store_rows(base, rows, stride_t, offs_d, stride_d, n_rows, D, tile, EVEN_D: tl.constexpr):
    """Store the real rows (< n_rows) and columns (< D) of a tile, cast to the target dtype."""
    ptrs = base + rows[:, None] * stride_t + offs_d[None, :] * stride_d
    mask = rows[:, None] < n_rows
    if not EVEN_D:
        mask = mask & (offs_d[None, :] < D)
    tl.store(ptrs, tile.to(base.dtype.element_ty), mask=mask)


@triton.jit
def key_block_range(m0, Tq, Tk, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Key bounds for the query block [m0, m0 + BLOCK_M): forward and dQ loop over these keys.

    W is an int here (the launcher passes Tk for "no window", which never binds). The bounds are
    multiples of BLOCK_N with start <= full_lo <= full_hi <= end <= cdiv(Tk, BLOCK_N) * BLOCK_N.
    """
    offset = Tk - Tq
    p_first = offset + m0
    p_last = offset + tl.minimum(m0 + BLOCK_M, Tq) - 1  # the last real query: tail rows are padding
    start = (tl.maximum(p_first - W + 1, 0) // BLOCK_N) * BLOCK_N
    end = tl.cdiv(p_last + 1, BLOCK_N) * BLOCK_N
    # Unmasked: every key of the block is >= p_last - W + 1 (inside the window of the last
    # query) and <= p_first (causal for the first query), hence also < Tk.
    full_lo = tl.cdiv(tl.maximum(p_last - W + 1, 0), BLOCK_N) * BLOCK_N
    full_hi = ((p_first + 1) // BLOCK_N) * BLOCK_N
    full_lo = tl.minimum(tl.maximum(full_lo, start), end)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), end)
    return start, full_lo, full_hi, end


@triton.jit
def query_block_range(n0, Tq, Tk, W, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Query bounds for the key block [n0, n0 + BLOCK_N): dK/dV loop over these queries.

    Multiples of BLOCK_M; start == end when no query can see any key of the block (keys older
    than every window: their gradients are zero).
    """
    offset = Tk - Tq
    s_last = tl.minimum(n0 + BLOCK_N, Tk) - 1
    i_lo = tl.maximum(n0 - offset, 0)  # first query whose causal reach includes key n0
    i_hi = tl.maximum(tl.minimum(s_last + W - offset, Tq), 0)  # one past the last query seeing s_last
    start = (i_lo // BLOCK_M) * BLOCK_M
    end = tl.cdiv(i_hi, BLOCK_M) * BLOCK_M
    # Unmasked: every query of the block is real, sits at or after s_last, and its window still
    # reaches n0 (offset + m0 + BLOCK_M - 1 - W < n0).
    full_lo = tl.cdiv(tl.maximum(s_last - offset, 0), BLOCK_M) * BLOCK_M
    full_hi = (tl.maximum(tl.minimum(n0 + W - offset, Tq), 0) // BLOCK_M) * BLOCK_M
    full_lo = tl.minimum(tl.maximum(full_lo, start), end)
    full_hi = tl.minimum(tl.maximum(full_hi, full_lo), end)
    return start, full_lo, full_hi, end


@triton.jit
def visible(p, s, W):
    """Whether query position p sees key position s (broadcast by the caller)."""
    return (s <= p) & (s > p - W)
