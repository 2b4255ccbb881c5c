"""Sliding-window (local causal) attention with interchangeable backends.

Layout follows flash-linear-attention: q (B, Tq, H, D), k and v (B, Tk, Hkv, D). Queries are
aligned to the end of the keys (flash-attn's bottom-right convention), so streaming passes
keys = [cached keys; new keys] and queries = the new tokens only.

Packed sequences (cu_seqlens, cu_seqlens_k; flash-attn's varlen convention): "reference" and
"sdpa" take them as a dense block-diagonal mask, "chunkwise" as a sequence mask on its grid when
each sequence has a key per query (chunkwise.py), else on a grid of chunks that each lie in one
sequence (packed.py), "flex" as a document mask; "triton" and "native" run once per sequence.
"""

from __future__ import annotations

import functools
from typing import Callable

import torch
import torch.nn.functional as F

from ..common.backends import choose_backend, require_triton, triton_can_run
from ..common.checks import check_cu_seqlens, check_tensors
from ..common.sequences import empty_output, has_tokens, per_sequence
from .chunkwise import first_reachable_key, sliding_window_attention_chunkwise
from .native import native_enabled, native_ops_for, sliding_window_attention_native
from .packed import sliding_window_attention_packed
from .triton.config import TRITON_DTYPES
from .reference import packed_positions, packed_window_mask, sliding_window_attention_reference, sliding_window_mask
from .sinks import with_sink_key

__all__ = [
    "BACKENDS",
    "choose_sliding_window_backend",
    "sliding_window_attention",
    "sliding_window_attention_reference",
    "sliding_window_mask",
]

# Every backend: (q, k, v, window, scale) -> out, with validated inputs, B, Tq >= 1, window None
# or < Tk. Those in PACKED also take bounds= (the offsets of the queries and of the keys of packed
# sequences, B = 1); those in SINKS take sinks= ((H,) logits joining every softmax denominator).
Backend = Callable[..., torch.Tensor]


def _sdpa(q, k, v, window, scale, *, bounds=None, sinks=None):
    """torch SDPA with a dense (Tq, Tk) boolean mask, or its causal kernel when there is no window.

    is_causal=True is top-left aligned, so it serves only Tq == Tk; unwindowed Tq < Tk (chunked
    prefill, decode) gets the explicit mask, which works with enable_gqa on every device. Packed
    sequences get the dense block-diagonal mask. Sinks take one more key (sinks.py), so no fused
    causal kernel then.
    """
    if window is not None and bounds is None:
        # Decode-sized calls stay O(window) whatever the cache length.
        first = first_reachable_key(q.shape[1], k.shape[1], window)
        k, v = k[:, first:], v[:, first:]
    q_len, k_len = q.shape[1], k.shape[1]
    causal = window is None and q_len == k_len and bounds is None and sinks is None
    if causal:
        mask = None
    elif bounds is None:
        mask = sliding_window_mask(q_len, k_len, window, device=q.device)
    else:
        mask = packed_window_mask(*bounds, window, device=q.device)
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))
    if sinks is not None:
        q, k, v, mask = with_sink_key(q, k, v, mask, sinks, scale)
    out = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, is_causal=causal, scale=scale, enable_gqa=q.shape[1] != k.shape[1]
    )
    return out.transpose(1, 2)


def _chunkwise(q, k, v, window, scale, *, bounds=None, sinks=None):
    """chunkwise.py, with the sequence of each token in the mask when every packed sequence has a
    key per query (training: no padding, no gathering), else packed.py."""
    if bounds is not None and bounds[0] != bounds[1]:
        return sliding_window_attention_packed(q, k, v, window, scale, *bounds, sinks)
    sequences = None if bounds is None else packed_positions(*bounds, q.device)[1]
    # Without a window every key is in reach and chunking saves nothing: O(Tq * Tk) like dense.
    window = k.shape[1] if window is None else window
    return sliding_window_attention_chunkwise(q, k, v, window, scale, sequences, sinks)


@functools.cache
def _compiled_flex_attention():
    from torch.nn.attention.flex_attention import flex_attention

    # Uncompiled flex_attention materialises every score; compiling is what makes it fast.
    return torch.compile(flex_attention)


@functools.lru_cache(maxsize=64)
def _flex_block_mask(q_len: int, k_len: int, window: int | None, device: torch.device):
    from torch.nn.attention.flex_attention import create_block_mask

    offset = k_len - q_len

    def mask_mod(b, h, q_idx, kv_idx):
        lag = q_idx + offset - kv_idx
        return (lag >= 0) & (lag < window) if window is not None else lag >= 0

    return create_block_mask(mask_mod, None, None, q_len, k_len, device=device)


def _flex_packed_block_mask(bounds_q: list[int], bounds_k: list[int], window: int | None, device: torch.device):
    """The block mask of packed sequences: a document mask on top of the window. Built per call
    (the offsets change from batch to batch), as flex_attention's document masking does."""
    from torch.nn.attention.flex_attention import create_block_mask

    sequence_q, sequence_k, position = packed_positions(bounds_q, bounds_k, device)

    def mask_mod(b, h, q_idx, kv_idx):
        lag = position[q_idx] - kv_idx
        visible = (sequence_q[q_idx] == sequence_k[kv_idx]) & (lag >= 0)
        return visible & (lag < window) if window is not None else visible

    return create_block_mask(mask_mod, None, None, bounds_q[-1], bounds_k[-1], device=device)


def _flex(q, k, v, window, scale, *, bounds=None):
    """flex_attention with a block mask, so key blocks outside the window (or another packed
    sequence) are skipped entirely."""
    if bounds is None:
        block_mask = _flex_block_mask(q.shape[1], k.shape[1], window, q.device)
    else:
        block_mask = _flex_packed_block_mask(*bounds, window, q.device)
    out = _compiled_flex_attention()(
        q.transpose(1, 2),
        k.transpose(1, 2),
        v.transpose(1, 2),
        block_mask=block_mask,
        scale=scale,
        enable_gqa=q.shape[2] != k.shape[2],
    )
    return out.transpose(1, 2)


def _native(q, k, v, window, scale):
    """The compiled CPU kernels (native.py): blocks of queries against only their band of keys,
    BLAS gemms, the softmax in cache. Where they cannot be built or LAYERZOO_NATIVE=0, chunkwise."""
    ops = native_ops_for(q)
    if ops is None:
        return _chunkwise(q, k, v, window, scale)
    return sliding_window_attention_native(ops, q, k, v, k.shape[1] if window is None else window, scale)


def _triton(q, k, v, window, scale):
    """Flash-attention-2 style Triton kernels that visit only in-window key blocks (triton/).

    choose_sliding_window_backend has checked device and dtype, so importing triton here is safe."""
    # Imported on first use: Triton reads TRITON_INTERPRET when the kernels are decorated.
    from .triton.function import sliding_window_attention_triton

    return sliding_window_attention_triton(q, k, v, window, scale)


BACKENDS: dict[str, Backend] = {
    "reference": sliding_window_attention_reference,
    "chunkwise": _chunkwise,
    "sdpa": _sdpa,
    "flex": _flex,
    "native": _native,
    "triton": _triton,
}
PACKED = ("reference", "chunkwise", "sdpa", "flex")
SINKS = ("reference", "chunkwise", "sdpa")

# flex_attention compiles per shape and needs a block mask per (Tq, Tk), which streaming decode
# (Tq = 1, Tk growing) would pay every step; SDPA on the trimmed keys is O(window) there anyway.
# The Triton kernel takes flex's place above the same threshold: below it a query block is mostly
# padding and the autotuner would key a new config per decode shape for little gain.
FLEX_MIN_QUERIES = 128


def _check_window(window: int | None) -> None:
    if window is None:
        return
    if not isinstance(window, int) or isinstance(window, bool) or window < 1:
        raise ValueError(
            f"sliding_window_attention: window must be an int >= 1 or None (unbounded), "
            f"got {window!r}"
        )


def _check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: object, cu_seqlens_k: object,
                  sinks: object) -> tuple[list[int], list[int]] | None:
    """One-line ValueErrors for inputs that do not fit; the offsets of the queries and keys of
    packed sequences (or None)."""
    op = "sliding_window_attention"
    sizes = check_tensors(op, {
        "q": (q, "B Tq H D"), "k": (k, "B Tk Hkv D"), "v": (v, "B Tk Hkv D"), "sinks": (sinks, "H"),
    }, same_dtype=("q", "k", "v"))
    heads, kv_heads, q_len, k_len = sizes["H"], sizes["Hkv"], sizes["Tq"], sizes["Tk"]
    if kv_heads == 0 or heads % kv_heads:
        raise ValueError(f"{op}: query heads ({heads}) must be a multiple of key/value heads ({kv_heads})")
    if cu_seqlens is None and cu_seqlens_k is not None:
        raise ValueError(f"{op}: cu_seqlens_k needs cu_seqlens (the queries' offsets)")
    bounds_q = check_cu_seqlens(op, cu_seqlens, sizes, q.device, length="Tq", rows=None)
    if bounds_q is None:
        if k_len < q_len:
            raise ValueError(f"{op}: fewer keys than queries ({k_len} < {q_len}); queries align to the last keys")
        return None
    if cu_seqlens_k is None:
        if k_len != q_len:
            raise ValueError(f"{op}: with {k_len} keys for {q_len} queries, pass cu_seqlens_k (the keys' offsets)")
        return bounds_q, bounds_q
    bounds_k = check_cu_seqlens(op, cu_seqlens_k, sizes, q.device, name="cu_seqlens_k", length="Tk", rows=None)
    if len(bounds_k) != len(bounds_q):
        raise ValueError(f"{op}: cu_seqlens_k must give the keys of the same {len(bounds_q) - 1} sequences "
                         f"as cu_seqlens, got {len(bounds_k) - 1}")
    for index in range(len(bounds_q) - 1):
        queries, keys = bounds_q[index + 1] - bounds_q[index], bounds_k[index + 1] - bounds_k[index]
        if keys < queries:
            raise ValueError(f"{op}: sequence {index} has fewer keys than queries ({keys} < {queries}); "
                             "queries align to the last keys")
    return bounds_q, bounds_k


def choose_sliding_window_backend(
    q: torch.Tensor, k: torch.Tensor, window: int | None, backend: str = "auto", packed: bool = False,
    sinks: bool = False,
) -> str:
    """The backend `sliding_window_attention(q, k, v, window, backend=backend)` runs; packed: with
    cu_seqlens; sinks: with attention sinks.

    "auto" picks: "sdpa" (fused causal kernel) when the window covers all Tk keys; otherwise, on
    CUDA with at least FLEX_MIN_QUERIES queries, "triton" (or "flex" when triton is missing or
    the dtype is fp64), "sdpa" on CUDA for fewer queries, and on CPU "native" (the compiled
    kernels) where they build, else "chunkwise" (also under TRITON_INTERPRET, where the
    interpreted kernels are far slower than torch's CPU SDPA). Packed sequences never get "sdpa"
    (its dense mask over all of them is O(Tq * Tk) where each query needs at most its own
    sequence's keys): "triton" or "flex" as above on CUDA, whatever the window, and "chunkwise"
    for fewer queries (a decode step of many streams) and off CUDA. Sinks are in the backends of
    SINKS: "chunkwise" takes the place of "triton", "flex" and "native".
    Raises ValueError for an unknown name or a backend the device or dtype cannot run.

    Args:
        q: (B, Tq, H, D) queries, as sliding_window_attention takes them (their device, dtype and
            Tq decide).
        k: (B, Tk, Hkv, D) keys (Tk decides whether the window covers them all).
        window: the call's window, an int >= 1 or None.
        backend: "auto" or a key of BACKENDS.
        packed: whether the call has cu_seqlens.
        sinks: whether the call has attention sinks.

    Returns:
        The backend's name, a key of BACKENDS.

    Raises:
        ValueError: a window that is not an int >= 1 or None; an unknown name; a backend without
            sinks for a call with them; "flex" off CUDA; "native" off the CPU; "triton" where
            Triton cannot run or for a dtype it does not take.
    """
    _check_window(window)
    name = choose_backend("sliding-window attention backend", backend, BACKENDS,
                          _fast_backend(q, k, window, packed, sinks))
    if sinks and name not in SINKS:
        raise ValueError(f"the {name!r} backend has no attention sinks; use one of {', '.join(SINKS)}")
    if name == "flex" and not q.is_cuda:
        raise ValueError(
            f"the 'flex' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA"
        )
    if name == "native" and q.device.type != "cpu":
        raise ValueError(f"the 'native' backend runs on the CPU, got {q.device}")
    if name == "triton":
        require_triton(q, "sliding_window_attention", TRITON_DTYPES)
    return name


def _fast_backend(q: torch.Tensor, k: torch.Tensor, window: int | None, packed: bool, sinks: bool) -> str:
    """What "auto" runs; see choose_sliding_window_backend."""
    if (window is None or window >= k.shape[1]) and not packed:
        return "sdpa"
    if q.is_cuda and q.shape[1] >= FLEX_MIN_QUERIES and not sinks:
        return "triton" if triton_can_run(q) and q.dtype in TRITON_DTYPES else "flex"
    if q.is_cuda:
        return "chunkwise" if packed else "sdpa"
    compiled = q.device.type == "cpu" and not packed and not sinks and native_enabled()
    return "native" if compiled else "chunkwise"


def sliding_window_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    window: int | None,
    *,
    scale: float | None = None,
    backend: str = "auto",
    cu_seqlens: torch.Tensor | None = None,
    cu_seqlens_k: torch.Tensor | None = None,
    sinks: torch.Tensor | None = None,
) -> torch.Tensor:
    """Causal attention over the last `window` keys (itself included), queries end-aligned.

    Query head h reads kv head h // (H // Hkv). Query i sits at key position p = Tk - Tq + i and
    attends keys s with p - window < s <= p: flash-attn's window_size=(window - 1, 0) with
    bottom-right causal. Any B, Tq >= 0. Differentiable in q, k and v on every backend.

    Packed sequences (cu_seqlens, cu_seqlens_k): every sequence attends as if called alone: its
    queries aligned to the end of its own keys (at least as many as its queries), nothing across
    sequences. A decode step of N streams is N queries of one token, each after its own cache.

    Sinks (GPT-OSS's attention sinks): query i weighs key s by exp(score) / (exp(sinks[h]) + sum
    of exp(score) over its visible keys), so a head can give a query little or no attention at all.

    Args:
        q: (B, Tq, H, D) queries, float (fp32, bf16, fp16 or fp64), one dtype with k and v.
        k: (B, Tk, Hkv, D) keys, H % Hkv == 0 and Tk >= Tq.
        v: (B, Tk, Hkv, D) values.
        window: keys each query attends to, itself included, an int >= 1; None (or window >= Tk)
            is full causal attention.
        scale: the factor on the scores; None: D ** -0.5.
        backend: "auto" (see choose_sliding_window_backend) or a key of BACKENDS: "reference"
            (dense), "chunkwise" (PyTorch), "sdpa" (torch's scaled_dot_product_attention), "flex"
            (flex_attention, CUDA), "native" (compiled CPU kernels), "triton" (CUDA).
        cu_seqlens: None, or packed sequences in flash-attn's varlen convention: B = 1, the
            offsets [0, l1, l1 + l2, ..., Tq] of each sequence's queries, a 1-D int32/int64
            tensor on q's device.
        cu_seqlens_k: the offsets [..., Tk] of each sequence's keys, as cu_seqlens; None:
            cu_seqlens (which needs Tk == Tq). Only with cu_seqlens.
        sinks: None, or (H,) logits, one per query head, that join every softmax denominator of
            their head. Differentiable; backends in SINKS ("reference", "chunkwise", "sdpa").

    Returns:
        (B, Tq, H, D) in q's dtype; bf16/fp16 softmax accumulates in fp32.

    Raises:
        ValueError: (one line, before any work) a tensor of the wrong shape, not floating point or
            on another device; q, k, v of different dtypes; H not a multiple of Hkv; fewer keys
            than queries (in a sequence); malformed cu_seqlens / cu_seqlens_k, or cu_seqlens_k
            alone; a window that is not an int >= 1 or None; an unknown backend, or one the
            device, dtype or sinks cannot run.
    """
    bounds = _check_inputs(q, k, v, cu_seqlens, cu_seqlens_k, sinks)
    name = choose_sliding_window_backend(q, k, window, backend, packed=bounds is not None, sinks=sinks is not None)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if bounds is None or name in PACKED:
        return _attend(name, q, k, v, window, scale, bounds, sinks)

    def one_sequence(inputs, _):
        return _attend(name, *inputs, window, scale), []

    return per_sequence(one_sequence, [(q, bounds[0]), (k, bounds[1]), (v, bounds[1])])[0]


def _attend(name, q, k, v, window, scale, bounds=None, sinks=None) -> torch.Tensor:
    """Backend `name` on validated inputs: a window covering every key is none; no queries, no work."""
    if window is not None and window >= k.shape[1]:
        window = None
    if not has_tokens(q):
        return empty_output(q, v.shape[-1])
    options = {key: value for key, value in (("bounds", bounds), ("sinks", sinks)) if value is not None}
    return BACKENDS[name](q, k, v, window, scale, **options)
