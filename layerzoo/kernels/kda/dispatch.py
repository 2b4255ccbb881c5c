"""KDA's public function, its backend choice and its backends by name.

Backends: "reference" (the step loop), "chunkwise" (PyTorch, autograd), "native" (the compiled CPU
forward; a call autograd records runs chunkwise), "fla" (flash-linear-attention's Triton
`chunk_kda`, CUDA). Packed sequences (cu_seqlens): "fla" takes them at once; the others run once
per sequence.
"""

from __future__ import annotations

import torch

from ..common.backends import Backend, taking
from ..common.matrix_state import call, choose
from .chunkwise import kda_chunkwise
from .fla import kda_fla
from .native import COMPILED, kda_native
from .reference import kda_reference

BACKENDS = {
    "reference": Backend(kda_reference),
    "chunkwise": Backend(kda_chunkwise, takes=("chunk_size",)),
    "native": Backend(kda_native, takes=("chunk_size",)),
    "fla": Backend(kda_fla, takes=("bounds",)),
}
PACKED = taking(BACKENDS, "bounds")


def choose_kda_backend(q: torch.Tensor, backend: str = "auto", *, differentiable: bool = False) -> str:
    """The backend `kda(q, ..., backend=backend)` runs.

    "auto" picks "reference" for a single token (one step: decoding), "fla" on CUDA where its
    kernel applies (installed, not fp64), "native" on the CPU where it builds and autograd does
    not record the call, and "chunkwise" otherwise. Raises ValueError for an unknown name or a
    backend these inputs cannot run on.

    Args:
        q: (B, T, H, K) queries, as kda takes them (their device, dtype and T decide).
        backend: "auto" or a key of BACKENDS ("reference", "chunkwise", "native", "fla").
        differentiable: whether autograd records the call (the compiled forward has no backward).

    Returns:
        The backend's name, a key of BACKENDS.

    Raises:
        ValueError: an unknown name; "fla" without flash-linear-attention or off CUDA; "native"
            off the CPU.
    """
    return choose("KDA backend", q, backend, BACKENDS, COMPILED, native_takes=not differentiable)


def kda(
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
    """The delta rule with a decay per key channel, per head with state S (K, V) starting at
    `initial_state` (or zeros):

        S = diag(exp(g_t)) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)

    q and k are used as given (the KDA mixer L2-normalises them). Any B, T >= 0; differentiable
    in every input, initial_state too.

    Args:
        q: (B, T, H, K) queries, float (fp32, bf16, fp16 or fp64), one dtype with k and v.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H, K) log decay per key channel (<= 0), any float dtype.
        beta: (B, T, H) write strength in (0, 1), any float dtype.
        scale: the factor on q; None: K ** -0.5.
        initial_state: (B, H, K, V), any float dtype, or None for zeros.
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk of "chunkwise", an int >= 1 ("fla" uses its own).
        backend: "auto" (see choose_kda_backend) or a key of BACKENDS: "reference" (the step
            loop), "chunkwise" (PyTorch, autograd), "native" (compiled CPU forward), "fla" (CUDA).
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
            flash-linear-attention or off CUDA; "native" off the CPU).
    """
    return call("kda", {
        "q": (q, "B T H K"), "k": (k, "B T H K"), "v": (v, "B T H V"), "g": (g, "B T H K"), "beta": (beta, "B T H"),
    }, BACKENDS, lambda q, differentiable: choose_kda_backend(q, backend, differentiable=differentiable),
        scale=scale, initial_state=initial_state, output_final_state=output_final_state, chunk_size=chunk_size,
        cu_seqlens=cu_seqlens)
