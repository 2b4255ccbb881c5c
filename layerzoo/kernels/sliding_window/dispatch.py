"""Sliding-window attention's public function, its backend choice and its backends by name.

Packed sequences (cu_seqlens, cu_seqlens_k; flash-attn's varlen convention): "reference" and
"sdpa" take them as a dense block-diagonal mask, "chunkwise" as a sequence mask on its grid when
each sequence has a key per query, else on a grid of chunks that each lie in one sequence
(chunkwise.py), "flex" as a document mask; "native" and "triton" run once per sequence.
"""

from __future__ import annotations

import torch

from ..common.backends import Backend, choose_backend, require_cpu, require_triton, taking, triton_can_run
from ..common.sequences import empty_output, has_tokens, per_sequence
from .checks import check_inputs, check_window
from .chunkwise import sliding_window_attention_chunkwise
from .flex import sliding_window_attention_flex
from .native import native_enabled, sliding_window_attention_native
from .reference import sliding_window_attention_reference
from .sdpa import sliding_window_attention_sdpa
from .triton import sliding_window_attention_triton
from .triton.config import TRITON_DTYPES

# Every backend takes q (B, Tq, H, D), k, v (B, Tk, Hkv, D), window (None or < Tk) and scale by
# keyword, validated, with B, Tq >= 1; "bounds" (the offsets of the queries and of the keys of
# packed sequences, B = 1) and "sinks" ((H,) logits joining every softmax denominator) where its
# Backend says so.
BACKENDS = {
    "reference": Backend(sliding_window_attention_reference, takes=("bounds", "sinks")),
    "chunkwise": Backend(sliding_window_attention_chunkwise, takes=("bounds", "sinks")),
    "native": Backend(sliding_window_attention_native),
    "triton": Backend(sliding_window_attention_triton),
    "sdpa": Backend(sliding_window_attention_sdpa, takes=("bounds", "sinks")),
    "flex": Backend(sliding_window_attention_flex, takes=("bounds",)),
}
PACKED = taking(BACKENDS, "bounds")
SINKS = taking(BACKENDS, "sinks")

# flex_attention compiles per shape and needs a block mask per (Tq, Tk), which streaming decode
# (Tq = 1, Tk growing) would pay every step; SDPA on the trimmed keys is O(window) there anyway.
# The Triton kernel takes flex's place above the same threshold: below it a query block is mostly
# padding and the autotuner would key a new config per decode shape for little gain.
FLEX_MIN_QUERIES = 128
# Off CUDA, packed sequences this long on average run one by one through the backend "auto" picks
# for each (SDPA's fused causal kernel, or the compiled one): the chunkwise grid gathers keys per
# chunk, which costs more than a loop over few long sequences; many short ones stay packed.
PER_SEQUENCE_MIN_QUERIES = 64


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
    for fewer queries (a decode step of many streams) and off CUDA; there "auto" runs packed
    sequences averaging PER_SEQUENCE_MIN_QUERIES queries or more one at a time instead, each
    through what it picks for that sequence alone. Sinks are in the backends of
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
        OptionError: (a ValueError) a window that is not an int >= 1 or None.
        ValueError: an unknown name; a backend without sinks for a call with them; "flex" off
            CUDA; "native" off the CPU; "triton" where Triton cannot run or for a dtype it does
            not take.
    """
    check_window(window)
    return _choose(q, k, window, backend, packed, sinks)


def _choose(q: torch.Tensor, k: torch.Tensor, window: int | None, backend: str, packed: bool, sinks: bool) -> str:
    """choose_sliding_window_backend on a checked window."""
    name = choose_backend("sliding-window attention backend", backend, BACKENDS,
                          lambda: _fast_backend(q, k, window, packed, sinks))
    if sinks and name not in SINKS:
        raise ValueError(f"the {name!r} backend has no attention sinks; use one of {', '.join(SINKS)}")
    if name == "flex" and not q.is_cuda:
        raise ValueError(
            f"the 'flex' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA"
        )
    if name == "native":
        require_cpu(q)
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
            (dense), "chunkwise" (PyTorch), "native" (compiled CPU kernels), "triton" (CUDA),
            "sdpa" (torch's scaled_dot_product_attention), "flex" (flex_attention, CUDA).
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
            alone; an unknown backend, or one the device, dtype or sinks cannot run.
        OptionError: (a ValueError) a window that is not an int >= 1 or None.
    """
    bounds = check_inputs(q, k, v, cu_seqlens, cu_seqlens_k, sinks)
    check_window(window)
    name = _choose(q, k, window, backend, packed=bounds is not None, sinks=sinks is not None)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    one_by_one = bounds is not None and backend == "auto" and long_sequences_off_cuda(q, bounds[0])
    if bounds is None or (name in PACKED and not one_by_one):
        return _attend(name, q, k, v, window, scale, bounds, sinks)

    def one_sequence(inputs, _):
        chosen = _choose(inputs[0], inputs[1], window, "auto", False, sinks is not None) if one_by_one else name
        return _attend(chosen, *inputs, window, scale, sinks=sinks), []

    return per_sequence(one_sequence, [(q, bounds[0]), (k, bounds[1]), (v, bounds[1])])[0]


def long_sequences_off_cuda(q: torch.Tensor, bounds_q: list[int]) -> bool:
    """Whether "auto" runs packed queries q (1, Tq, ...) at offsets bounds_q one sequence at a time."""
    return not q.is_cuda and q.shape[1] >= PER_SEQUENCE_MIN_QUERIES * (len(bounds_q) - 1)


def _attend(name, q, k, v, window, scale, bounds=None, sinks=None) -> torch.Tensor:
    """Backend `name` on validated inputs: a window covering every key is none; no queries, no work."""
    if window is not None and window >= k.shape[1]:
        window = None
    if not has_tokens(q):
        return empty_output(q, v.shape[-1])
    return BACKENDS[name](q=q, k=k, v=v, window=window, scale=scale, optional={"bounds": bounds, "sinks": sinks})
