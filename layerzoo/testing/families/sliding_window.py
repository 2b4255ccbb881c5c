"""Sliding-window attention as a KernelFamily.

Its streaming state is the caller's: the last window - 1 keys and values (all of them without a
window); queries are end-aligned, so a call attends over [cache; new keys].
"""

from __future__ import annotations

import itertools

import torch
from hypothesis import strategies as st

from ...kernels import sliding_window_attention
from ..kernels import KernelCase, KernelFamily
from .draws import DTYPES, generator


@st.composite
def swa_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, kv_heads = draw(st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 2)]))
    dim = draw(st.sampled_from([4, 8]))
    window = draw(st.one_of(st.none(), st.integers(2, 8)))  # window 1 would leave dq, dk zero
    cached = draw(st.integers(1, 8 if window is None else window - 1))
    gen = generator(draw)

    def randn(*shape):
        return torch.randn(*shape, generator=gen).to(dtype)

    inputs = {"q": randn(batch, length, heads, dim), "k": randn(batch, length, kv_heads, dim),
              "v": randn(batch, length, kv_heads, dim)}
    state = (randn(batch, cached, kv_heads, dim), randn(batch, cached, kv_heads, dim))
    return KernelCase(inputs, state, {"window": window})


def run_swa(inputs, state, backend, options):
    if options.get("cu_seqlens") is not None:
        return run_swa_packed(inputs, state, backend, options)
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    if state is not None and state[0].shape[1]:
        k, v = torch.cat((state[0], k), dim=1), torch.cat((state[1], v), dim=1)
    out = sliding_window_attention(q, k, v, options["window"], backend=backend)
    return out, kept_keys(k, v, options["window"])


def kept_keys(k, v, window):
    """The streaming state after keys k, v (B, Tk, Hkv, D): the last window - 1 (all without a window)."""
    first = 0 if window is None else max(k.shape[1] - (window - 1), 0)
    return k[:, first:], v[:, first:]


def run_swa_packed(inputs, state, backend, options):
    """Packed sequences, each after its own cache (a state row, as a batch of them would be): the
    keys of sequence s are [cache s; its new keys], given by cu_seqlens_k. The final state is the
    tuple of the sequences' kept keys, which may differ in length."""
    q, k, v, offsets = inputs["q"], inputs["k"], inputs["v"], options["cu_seqlens"]
    if state is None:  # the keys are the queries' own tokens: cu_seqlens_k defaults to cu_seqlens
        out = sliding_window_attention(q, k, v, options["window"], backend=backend, cu_seqlens=offsets)
        keys = [(k[:, start:end], v[:, start:end]) for start, end in itertools.pairwise(offsets.tolist())]
    else:
        keys = [(torch.cat((state[0][index:index + 1], k[:, start:end]), dim=1),
                 torch.cat((state[1][index:index + 1], v[:, start:end]), dim=1))
                for index, (start, end) in enumerate(itertools.pairwise(offsets.tolist()))]
        key_offsets = torch.tensor([0, *itertools.accumulate(key.shape[1] for key, _ in keys)], dtype=offsets.dtype)
        k, v = (torch.cat(parts, dim=1) for parts in zip(*keys))
        out = sliding_window_attention(q, k, v, options["window"], backend=backend, cu_seqlens=offsets,
                                       cu_seqlens_k=key_offsets)
    return out, tuple(kept_keys(*pair, options["window"]) for pair in keys)


SLIDING_WINDOW = KernelFamily(
    "sliding_window_attention", swa_cases, run_swa, dtypes=DTYPES, free_length=("q",), same_dtype=("q", "k", "v"),
    checked_state=None, joined_states=tuple,
)
