"""The gated delta rule (Gated DeltaNet's recurrence) with interchangeable backends.

Shapes and semantics follow flash-linear-attention's `chunk_gated_delta_rule`, so either can
stand in for the other: q, k (B, T, H, K); v (B, T, H, V); g, beta (B, T, H); state (B, H, K, V).
"""

from __future__ import annotations

from typing import Callable

import torch

from ...errors import unknown_name_message
from .chunkwise import chunkwise_gated_delta_rule
from .fla import FLA_CHUNK_SIZES, fla_gated_delta_rule
from .reference import compute_dtype, gated_delta_rule_reference

__all__ = [
    "BACKENDS",
    "choose_gated_delta_backend",
    "gated_delta_rule",
    "gated_delta_rule_reference",
]

# Every backend: (q, k, v, g, beta, scale, initial_state, chunk_size) -> (out, final_state), with
# validated inputs and T >= 1.
Backend = Callable[..., "tuple[torch.Tensor, torch.Tensor]"]


def _recurrent(q, k, v, g, beta, scale, initial_state, chunk_size):
    return gated_delta_rule_reference(q, k, v, g, beta, scale, initial_state)


BACKENDS: dict[str, Backend] = {
    "recurrent": _recurrent,
    "chunkwise": chunkwise_gated_delta_rule,
    "fla": fla_gated_delta_rule,
}


def _check_inputs(q, k, v, g, beta, initial_state, chunk_size) -> None:
    def fail(message: str):
        raise ValueError(f"gated_delta_rule: {message}")

    named = {"q": q, "k": k, "v": v, "g": g, "beta": beta}
    if initial_state is not None:
        named["initial_state"] = initial_state
    for name, t in named.items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            fail(f"{name} must be a float tensor, got {t.dtype if isinstance(t, torch.Tensor) else type(t).__name__}")
    for name, t, dims in (("q", q, 4), ("k", k, 4), ("v", v, 4), ("g", g, 3), ("beta", beta, 3)):
        if t.dim() != dims:
            layout = "(B, T, H, D)" if dims == 4 else "(B, T, H)"
            fail(f"{name} must be a {dims}-d tensor {layout}, got shape {tuple(t.shape)}")
    if q.shape != k.shape:
        fail(f"q and k must have the same shape, got q {tuple(q.shape)} and k {tuple(k.shape)}")
    batch, length, heads, key_dim = k.shape
    if v.shape[:3] != k.shape[:3]:
        fail(f"v must be (B, T, H, V) = ({batch}, {length}, {heads}, V), got {tuple(v.shape)}")
    for name, t in (("g", g), ("beta", beta)):
        if t.shape != k.shape[:3]:
            fail(f"{name} must be (B, T, H) = {tuple(k.shape[:3])}, got {tuple(t.shape)}")
    state_shape = (batch, heads, key_dim, v.shape[-1])
    if initial_state is not None and tuple(initial_state.shape) != state_shape:
        fail(f"initial_state must be (B, H, K, V) = {state_shape}, got {tuple(initial_state.shape)}")
    if len({q.dtype, k.dtype, v.dtype}) > 1:
        fail(f"q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if len({t.device for t in named.values()}) > 1:
        fail(f"all inputs must be on one device, got {', '.join(str(t.device) for t in named.values())}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        fail(f"chunk_size must be an int >= 1, got {chunk_size!r}")


def choose_gated_delta_backend(q: torch.Tensor, backend: str = "auto", chunk_size: int = 64) -> str:
    """The backend `gated_delta_rule(q, ..., chunk_size=chunk_size, backend=backend)` runs.

    "auto" picks "recurrent" for a single token (one step: decoding), "fla" on CUDA where its
    kernel applies (chunk_size 16, 32 or 64; not fp64), and "chunkwise" otherwise. Raises
    ValueError for an unknown name or a backend these inputs cannot run on.
    """
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(unknown_name_message("gated delta rule backend", backend, [*BACKENDS, "auto"]))
    if backend == "fla" and not q.is_cuda:
        raise ValueError(f"the 'fla' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA")
    if backend == "fla" and chunk_size not in FLA_CHUNK_SIZES:
        raise ValueError(f"the 'fla' backend needs chunk_size in {FLA_CHUNK_SIZES}, got {chunk_size}")
    if backend != "auto":
        return backend
    if q.shape[1] == 1:
        return "recurrent"
    fla_runs = q.is_cuda and q.dtype != torch.float64 and chunk_size in FLA_CHUNK_SIZES
    return "fla" if fla_runs else "chunkwise"


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
):
    """The gated delta rule, per head with state S (K, V) starting at `initial_state` (or zeros):

        S = exp(g_t) S;  u = beta_t (v_t - S^T k_t);  S = S + k_t u^T;  o_t = S^T (scale q_t)

    q, k: (B, T, H, K), one float dtype with v: (B, T, H, V). g: (B, T, H) log decay (<= 0);
    beta: (B, T, H) write strength in (0, 1); both any float dtype. q and k are used as given:
    Gated DeltaNet L2-normalises them before calling this. initial_state: (B, H, K, V), any
    float dtype. scale defaults to K ** -0.5. chunk_size: tokens per chunk of the chunked
    backends ("fla" takes 16, 32 or 64). Any T; differentiable in every input, initial_state too.

    Returns o (B, T, H, V) in q's dtype, or (o, final_state) when output_final_state, the state
    (B, H, K, V) in fp32 (fp64 for fp64 inputs) whatever the input dtype. `backend` is "auto"
    (see choose_gated_delta_backend) or a key of BACKENDS.
    """
    _check_inputs(q, k, v, g, beta, initial_state, chunk_size)
    name = choose_gated_delta_backend(q, backend, chunk_size)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    if q.shape[1] == 0:  # no steps: an empty output, and the state passes through
        batch, _, heads, key_dim = k.shape
        out = q.new_zeros(batch, 0, heads, v.shape[-1])
        state = q.new_zeros(batch, heads, key_dim, v.shape[-1]) if initial_state is None else initial_state
        state = state.to(compute_dtype(q.dtype))
    else:
        out, state = BACKENDS[name](q, k, v, g, beta, scale, initial_state, chunk_size)
    return (out, state) if output_final_state else out
