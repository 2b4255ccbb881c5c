"""Sliding-window attention inputs drawn by hypothesis: rectangular batches and packed sequences."""

from __future__ import annotations

import itertools

import torch
from hypothesis import strategies as st


@st.composite
def attention_case(draw, dtypes=(torch.float32, torch.bfloat16)):
    """(q, k, v, window) with shapes around the chunkwise path's 64-row chunks."""
    heads = draw(st.sampled_from([1, 2, 4]))
    kv_heads = draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0]))
    batch = draw(st.integers(1, 2))
    q_len = draw(st.one_of(st.integers(1, 8), st.integers(60, 200)))
    k_len = q_len + draw(st.one_of(st.just(0), st.integers(1, 150)))  # extra keys: a cache
    window = draw(st.one_of(st.none(), st.just(1), st.integers(1, 40), st.integers(40, 400)))
    dim = draw(st.sampled_from([8, 16]))
    dtype = draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    q = torch.randn(batch, q_len, heads, dim, generator=gen).to(dtype)
    k = torch.randn(batch, k_len, kv_heads, dim, generator=gen).to(dtype)
    v = torch.randn(batch, k_len, kv_heads, dim, generator=gen).to(dtype)
    return q, k, v, window


@st.composite
def packed_attention_case(draw, dtypes=(torch.float32, torch.bfloat16)):
    """(q, k, v, window, cu_seqlens, cu_seqlens_k): up to 4 sequences of up to 150 queries, each
    after up to 100 more keys (a cache), windows as in attention_case."""
    heads = draw(st.sampled_from([1, 2, 4]))
    kv_heads = draw(st.sampled_from([d for d in (1, 2, 4) if heads % d == 0]))
    count = draw(st.integers(1, 4))
    q_lengths = draw(st.lists(st.one_of(st.just(1), st.integers(0, 150)), min_size=count, max_size=count))
    extra = draw(st.lists(st.one_of(st.just(0), st.integers(1, 100)), min_size=count, max_size=count))
    window = draw(st.one_of(st.none(), st.just(1), st.integers(1, 40), st.integers(40, 400)))
    dim, dtype = draw(st.sampled_from([8, 16])), draw(st.sampled_from(dtypes))
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    k_len = sum(q_lengths) + sum(extra)
    q = torch.randn(1, sum(q_lengths), heads, dim, generator=gen).to(dtype)
    k, v = (torch.randn(1, k_len, kv_heads, dim, generator=gen).to(dtype) for _ in range(2))
    offsets = [torch.tensor([0, *itertools.accumulate(lengths)]) for lengths in
               (q_lengths, [a + b for a, b in zip(q_lengths, extra)])]
    return q, k, v, window, *offsets
