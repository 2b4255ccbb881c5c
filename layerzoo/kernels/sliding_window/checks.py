"""The input checks of sliding_window_attention: one line each, before any work.

A bad window is an OptionError (a ValueError), the type the `window` option raises where a spec,
a mixer or set_window takes it, so one `except` catches it wherever it entered.
"""

from __future__ import annotations

import torch

from ...errors import OptionError
from ..common.checks import check_cu_seqlens, check_tensors

OP = "sliding_window_attention"


def check_window(window: object) -> None:
    """An OptionError unless window is an int >= 1 or None: two comparisons, no tensor work."""
    if window is not None and (not isinstance(window, int) or isinstance(window, bool) or window < 1):
        raise OptionError("window", f"{OP} takes an int >= 1 or None (unbounded), got {window!r}")


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: object, cu_seqlens_k: object,
                 sinks: object) -> tuple[list[int], list[int]] | None:
    """One-line ValueErrors for tensors and offsets that do not fit; the offsets of the queries and
    keys of packed sequences (or None)."""
    sizes = check_tensors(OP, {
        "q": (q, "B Tq H D"), "k": (k, "B Tk Hkv D"), "v": (v, "B Tk Hkv D"), "sinks": (sinks, "H"),
    }, same_dtype=("q", "k", "v"))
    heads, kv_heads, q_len, k_len = sizes["H"], sizes["Hkv"], sizes["Tq"], sizes["Tk"]
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"{OP}: query heads ({heads}) must be a multiple of key/value heads ({kv_heads})")
    if cu_seqlens is None and cu_seqlens_k is not None:
        raise ValueError(f"{OP}: cu_seqlens_k needs cu_seqlens (the queries' offsets)")
    bounds_q = check_cu_seqlens(OP, cu_seqlens, sizes, q.device, length="Tq", rows=None)
    if bounds_q is None:
        if k_len < q_len:
            raise ValueError(f"{OP}: fewer keys than queries ({k_len} < {q_len}); queries align to the last keys")
        return None
    if cu_seqlens_k is None:
        if k_len != q_len:
            raise ValueError(f"{OP}: with {k_len} keys for {q_len} queries, pass cu_seqlens_k (the keys' offsets)")
        return bounds_q, bounds_q
    bounds_k = check_cu_seqlens(OP, cu_seqlens_k, sizes, q.device, name="cu_seqlens_k", length="Tk", rows=None)
    if len(bounds_k) != len(bounds_q):
        raise ValueError(f"{OP}: cu_seqlens_k must give the keys of the same {len(bounds_q) - 1} sequences "
                         f"as cu_seqlens, got {len(bounds_k) - 1}")
    for index in range(len(bounds_q) - 1):
        queries, keys = bounds_q[index + 1] - bounds_q[index], bounds_k[index + 1] - bounds_k[index]
        if keys < queries:
            raise ValueError(f"{OP}: sequence {index} has fewer keys than queries ({keys} < {queries}); "
                             "queries align to the last keys")
    return bounds_q, bounds_k
