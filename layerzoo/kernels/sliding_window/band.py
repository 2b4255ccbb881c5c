"""Which keys a block of queries reaches, and how many queries the chunkwise kernels take at once.

Queries are end-aligned: query i of Tq sits at key position Tk - Tq + i and sees the `window` keys
up to its own. The chunkwise kernels cut the queries into chunks, each reading the band of keys
its queries see.
"""

from __future__ import annotations

# Query rows per chunk: about CHUNK suits torch's fused CPU SDPA kernel, fewer than MIN_CHUNK rows
# drown in per-chunk overhead, and a chunk as wide as a small window wastes less on out-of-window
# scores than a CHUNK-row one.
CHUNK = 64
MIN_CHUNK = 16
# Each query chunk reads its own and up to this many earlier key chunks, so the gathered keys and
# values take at most (MAX_LOOKBACK + 1) times the memory of k and v; more saves a little time.
MAX_LOOKBACK = 4


def chunk_size(window: int) -> int:
    """Query rows per chunk for a window: min(window, CHUNK), grown so lookback <= MAX_LOOKBACK."""
    return max(MIN_CHUNK, min(window, CHUNK), -(-window // MAX_LOOKBACK))


def first_reachable_key(q_len: int, k_len: int, window: int) -> int:
    """Index of the oldest key that any of the last q_len queries can see."""
    return max(0, k_len - q_len - window + 1)
