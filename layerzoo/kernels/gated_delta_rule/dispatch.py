"""The gated delta rule's public function, its backend choice and its backends by name.

Backends: "reference" (the step loop), "chunkwise" (PyTorch, a hand-written backward), "native"
(the compiled CPU forward and backward), "fla" (flash-linear-attention's Triton kernel, CUDA).
Packed sequences (cu_seqlens): "fla" takes them at once; the others run once per sequence (the
compiled kernel's operators carry one state per row, and its cost per call is small next to a
sequence's work).
"""

from __future__ import annotations

import torch

from ..common.backends import Backend, taking
from ..common.matrix_state import call, choose
from .chunkwise import gated_delta_rule_chunkwise
from .fla import FLA_CHUNK_SIZES, gated_delta_rule_fla
from .native import COMPILED, gated_delta_rule_native
from .reference import gated_delta_rule_reference

BACKENDS = {
    "reference": Backend(gated_delta_rule_reference),
    "chunkwise": Backend(gated_delta_rule_chunkwise, takes=("chunk_size",)),
    "native": Backend(gated_delta_rule_native, takes=("chunk_size",)),
    "fla": Backend(gated_delta_rule_fla, takes=("chunk_size", "bounds")),
}
PACKED = taking(BACKENDS, "bounds")


def choose_gated_delta_rule_backend(q: torch.Tensor, backend: str = "auto", chunk_size: int = 64) -> str:
    """The backend `gated_delta_rule(q, ..., chunk_size=chunk_size, backend=backend)` runs.

    "auto" picks "reference" for a single token (one step: decoding), "fla" on CUDA where its
    kernel applies (installed; chunk_size 16, 32 or 64; not fp64), "native" on the CPU where it
    builds, and "chunkwise" otherwise. Raises ValueError for an unknown name or a backend these
    inputs cannot run on.

    Args:
        q: (B, T, H, K) queries, as gated_delta_rule takes them (their device, dtype and T decide).
        backend: "auto" or a key of BACKENDS ("reference", "chunkwise", "native", "fla").
        chunk_size: the chunk size the call will use.

    Returns:
        The backend's name, a key of BACKENDS.

    Raises:
        ValueError: an unknown name; "fla" without flash-linear-attention, off CUDA, or at a
            chunk_size other than 16, 32 and 64; "native" off the CPU.
    """
    name = choose("gated delta rule backend", q, backend, BACKENDS, COMPILED, fla_takes=chunk_size in FLA_CHUNK_SIZES)
    if name == "fla" and chunk_size not in FLA_CHUNK_SIZES:
        raise ValueError(f"the 'fla' backend needs chunk_size in {FLA_CHUNK_SIZES}, got {chunk_size}")
    return name


def gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    *,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    backend: str = "auto",
    cu_seqlens: torch.Tensor | None = None,
):
    """The gated delta rule, per head with state S (K, V) starting at `initial_state` (or zeros):

        S = exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)

    q and k are used as given: Gated DeltaNet L2-normalises them before calling this. Any
    B, T >= 0; differentiable in every input, initial_state too.

    Args:
        q: (B, T, H, K) queries, float (fp32, bf16, fp16 or fp64), one dtype with k and v.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H) log decay (<= 0), any float dtype.
        beta: (B, T, H) write strength in (0, 1), any float dtype.
        scale: the factor on q; None: K ** -0.5.
        initial_state: (B, H, K, V), any float dtype, or None for zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk of the chunked backends, an int >= 1 ("fla" takes 16, 32
            or 64).
        backend: "auto" (see choose_gated_delta_rule_backend) or a key of BACKENDS: "reference"
            (the step loop), "chunkwise" (PyTorch), "native" (compiled CPU kernel), "fla" (CUDA).
        cu_seqlens: None, or packed sequences in flash-linear-attention's convention: B = 1, and
            a 1-D int32/int64 tensor of offsets [0, l1, l1 + l2, ..., T] on q's device (empty
            sequences allowed). Then initial_state and the final state are (N, H, K, V),
            N = len(cu_seqlens) - 1, one row per sequence, and each sequence runs as if called
            alone (an empty one passes its state on).

    Returns:
        o (B, T, H, V) in q's dtype; with output_final_state, the pair (o, final_state), the state
            (B, H, K, V) (N, H, K, V with cu_seqlens) in fp32 (fp64 for fp64 inputs) whatever the
            input dtype.

    Raises:
        ValueError: (one line, before any work) a tensor of the wrong shape, not floating point or
            on another device; q, k, v of different dtypes; a chunk_size that is not an int >= 1;
            malformed cu_seqlens; g holding +inf, or -inf (a full reset) on a chunked backend; an
            unknown backend, or one these inputs cannot run on ("fla" without
            flash-linear-attention, off CUDA or at another chunk_size; "native" off the CPU).
    """
    return call("gated_delta_rule", {
        "q": (q, "B T H K"), "k": (k, "B T H K"), "v": (v, "B T H V"), "g": (g, "B T H"), "beta": (beta, "B T H"),
    }, BACKENDS, lambda q, differentiable: choose_gated_delta_rule_backend(q, backend, chunk_size),
        scale=scale, initial_state=initial_state, output_final_state=output_final_state, chunk_size=chunk_size,
        cu_seqlens=cu_seqlens)

