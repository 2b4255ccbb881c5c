"""The block ranges the sliding-window Triton kernels visit, in plain Python: a test-side mirror of
layerzoo/kernels/sliding_window/triton/common.py (key_block_range, query_block_range; the meaning
of the four bounds is documented there).

This copy lets the tests check the ranges against the dense mask without running a kernel. All
operands stay non-negative, so Python's floor division equals Triton's truncating one.
"""

from __future__ import annotations

from layerzoo.kernels.sliding_window.chunkwise import first_reachable_key


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def key_block_range(
    m0: int, q_len: int, k_len: int, window: int, block_m: int, block_n: int
) -> tuple[int, int, int, int]:
    """Key bounds for the query block [m0, m0 + block_m): forward and dQ loop over these keys.

    window is an int here (the launcher passes k_len for "no window", which never binds).
    Returns (start, full_lo, full_hi, end), multiples of block_n with start <= full_lo <= full_hi
    <= end, end <= cdiv(k_len, block_n) * block_n.
    """
    offset = k_len - q_len
    p_first = offset + m0
    p_last = offset + min(m0 + block_m, q_len) - 1  # the last real query: tail rows are padding
    start = max(p_first - window + 1, 0) // block_n * block_n
    end = _cdiv(p_last + 1, block_n) * block_n
    # Unmasked: every key of the block is >= p_last - window + 1 (inside the window of the last
    # query) and <= p_first (causal for the first query), hence also < k_len.
    full_lo = _cdiv(max(p_last - window + 1, 0), block_n) * block_n
    full_hi = (p_first + 1) // block_n * block_n
    full_lo = min(max(full_lo, start), end)
    full_hi = min(max(full_hi, full_lo), end)
    return start, full_lo, full_hi, end


def query_block_range(
    n0: int, q_len: int, k_len: int, window: int, block_m: int, block_n: int
) -> tuple[int, int, int, int]:
    """Query bounds for the key block [n0, n0 + block_n): dK/dV loop over these queries.

    Returns (start, full_lo, full_hi, end) as multiples of block_m; start == end when no query
    can see any key of the block (keys older than every window: their gradients are zero).
    """
    offset = k_len - q_len
    s_last = min(n0 + block_n, k_len) - 1
    i_lo = max(n0 - offset, 0)  # first query whose causal reach includes key n0
    i_hi = max(min(s_last + window - offset, q_len), 0)  # one past the last query seeing s_last
    start = i_lo // block_m * block_m
    end = _cdiv(i_hi, block_m) * block_m
    # Unmasked: every query of the block is real, sits at or after s_last, and its window still
    # reaches n0 (offset + m0 + block_m - 1 - window < n0).
    full_lo = _cdiv(max(s_last - offset, 0), block_m) * block_m
    full_hi = max(min(n0 + window - offset, q_len), 0) // block_m * block_m
    full_lo = min(max(full_lo, start), end)
    full_hi = min(max(full_hi, full_lo), end)
    return start, full_lo, full_hi, end


def first_visited_key(q_len: int, k_len: int, window: int, block_n: int) -> int:
    """Start of the first key block any query reaches; dK/dV of keys before it are zero."""
    return first_reachable_key(q_len, k_len, window) // block_n * block_n
