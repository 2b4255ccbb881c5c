"""mLSTM (xLSTM's matrix memory) with interchangeable backends.

Layout follows flash-linear-attention: q, k (B, T, H, Dk), v (B, T, H, Dv), gates (B, T, H).
Semantics are NX-AI mlstm_kernels' stabilised mLSTM (see reference.py): exp input gate, sigmoid
forget gate in log space, max stabiliser m, normaliser n, q scaled by Dk^-0.5.
Backends: "recurrent" (the step loop), "chunkwise" (PyTorch), "triton" (kernels in triton/, for
CUDA; imported on first use).
"""

from __future__ import annotations

from typing import Callable

import torch

from ...errors import unknown_name_message
from ..triton_support import require_triton, triton_can_run
from .chunkwise import mlstm_chunkwise
from .reference import EPS, MLSTMState, compute_dtype, mlstm_reference, mlstm_step

__all__ = [
    "BACKENDS",
    "EPS",
    "MLSTMState",
    "choose_mlstm_backend",
    "mlstm",
    "mlstm_chunkwise",
    "mlstm_reference",
    "mlstm_step",
    "mlstm_triton",
]


def mlstm_triton(q, k, v, i, f, initial_state=None, chunk_size=64, **blocks):
    """The "triton" backend: chunkwise Triton kernels (triton/), imported on first call.

    Same contract as the other backends: q, k (B, T, H, Dk), v (B, T, H, Dv), i, f (B, T, H),
    T >= 1 -> (h (B, T, H, Dv), final MLSTMState), differentiable in every input. CUDA tensors,
    or CPU under TRITON_INTERPRET=1 (else a one-line ValueError). fp32, bf16, fp16 and fp64
    inputs (fp64 computes in fp64). chunk_size is rounded up to a power of two in [16, 128],
    since the kernels' tiles need one; the result does not depend on it beyond rounding.
    blocks: block_k / block_v tile-width overrides (see triton.function.mlstm_triton).
    """
    require_triton(q, "mlstm")
    from .triton import mlstm_triton as kernel  # imports triton: only now, see the module doc

    return kernel(q, k, v, i, f, initial_state, chunk_size, **blocks)


# Every backend: (q, k, v, i, f, initial_state or None, chunk_size) -> (h, final MLSTMState), with
# validated inputs and T >= 1.
Backend = Callable[..., "tuple[torch.Tensor, MLSTMState]"]
BACKENDS: dict[str, Backend] = {
    "recurrent": mlstm_reference,
    "chunkwise": mlstm_chunkwise,
    "triton": mlstm_triton,
}


def choose_mlstm_backend(q: torch.Tensor, backend: str = "auto") -> str:
    """The backend `mlstm(q, ..., backend=backend)` runs.

    "auto" is "triton" for CUDA tensors when Triton is installed, else "chunkwise" (on CPU the
    Triton interpreter would be far slower than PyTorch). Raises ValueError for an unknown name.
    """
    if backend != "auto" and backend not in BACKENDS:
        raise ValueError(unknown_name_message("mLSTM backend", backend, [*BACKENDS, "auto"]))
    if backend == "auto":
        return "triton" if q.is_cuda and triton_can_run(q) else "chunkwise"
    return backend


def mlstm(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    *,
    initial_state: MLSTMState | tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
    output_final_state: bool = False,
    chunk_size: int = 64,
    backend: str = "auto",
):
    """The stabilised mLSTM over a sequence.

    q, k: (B, T, H, Dk) and v: (B, T, H, Dv), one float dtype; i, f: (B, T, H) input and forget
    gate pre-activations, any float dtype (the input gate is exp(i), the forget gate sigmoid(f)).
    initial_state: None (the empty state, all zeros) or an MLSTMState / (C, n, m) tuple with
    C (B, H, Dk, Dv), n (B, H, Dk), m (B, H). Any T >= 0; gradients reach every input, the initial
    state included. chunk_size: tokens per chunk of the chunkwise backends (any T, no multiple
    needed; "triton" rounds it up to a power of two in [16, 128]). backend: "auto" (see
    choose_mlstm_backend) or a key of BACKENDS.

    Returns h (B, T, H, Dv) in q's dtype, or (h, final MLSTMState) with output_final_state. States
    and arithmetic are fp32 whatever the input dtype (fp64 for fp64 inputs).
    """
    _check_inputs(q, k, v, i, f, chunk_size)
    if initial_state is not None:
        initial_state = _check_state(initial_state, q, v)
    name = choose_mlstm_backend(q, backend)
    if q.shape[1]:
        h, state = BACKENDS[name](q, k, v, i, f, initial_state, chunk_size)
    else:
        h = v.new_zeros(v.shape, dtype=q.dtype)
        batch, _, heads, key_dim = q.shape
        dtype = compute_dtype(q.dtype)
        state = (
            MLSTMState.empty(batch, heads, key_dim, v.shape[-1], dtype, q.device)
            if initial_state is None
            else MLSTMState(*(t.to(dtype) for t in initial_state))
        )
    return (h, state) if output_final_state else h


def _fail(message: str):
    raise ValueError(f"mlstm: {message}")


def _shape(t) -> object:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__


def _check_inputs(q, k, v, i, f, chunk_size) -> None:
    for name, t, dims, layout in (
        ("q", q, 4, "(B, T, H, Dk)"),
        ("k", k, 4, "(B, T, H, Dk)"),
        ("v", v, 4, "(B, T, H, Dv)"),
        ("i", i, 3, "(B, T, H)"),
        ("f", f, 3, "(B, T, H)"),
    ):
        if not isinstance(t, torch.Tensor) or t.dim() != dims:
            _fail(f"{name} must be a {dims}-d tensor {layout}, got {_shape(t)}")
    if k.shape != q.shape:
        _fail(f"q and k must have the same shape, got q {_shape(q)} and k {_shape(k)}")
    if v.shape[:3] != q.shape[:3]:
        _fail(f"v must match q in (B, T, H), got q {_shape(q)} and v {_shape(v)}")
    for name, t in (("i", i), ("f", f)):
        if t.shape != q.shape[:3]:
            _fail(f"{name} must have shape (B, T, H) = {tuple(q.shape[:3])}, got {_shape(t)}")
    if not q.is_floating_point() or len({q.dtype, k.dtype, v.dtype}) > 1:
        _fail(f"q, k, v must share one float dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (i.is_floating_point() and f.is_floating_point()):
        _fail(f"gates i and f must be floating point, got {i.dtype} and {f.dtype}")
    if len({t.device for t in (q, k, v, i, f)}) > 1:
        _fail(f"q, k, v, i, f must be on one device, got {[str(t.device) for t in (q, k, v, i, f)]}")
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        _fail(f"chunk_size must be an integer >= 1, got {chunk_size!r}")


def _check_state(state, q: torch.Tensor, v: torch.Tensor) -> MLSTMState:
    """An MLSTMState from an MLSTMState or a (C, n, m) tuple whose shapes fit q and v."""
    if not isinstance(state, MLSTMState):
        if not isinstance(state, (tuple, list)) or len(state) != 3:
            _fail(f"initial_state must be an MLSTMState or a (C, n, m) tuple, got {type(state).__name__}")
        state = MLSTMState(*state)
    batch, _, heads, key_dim = q.shape
    expected = {
        "C": (batch, heads, key_dim, v.shape[-1]),
        "n": (batch, heads, key_dim),
        "m": (batch, heads),
    }
    for (name, shape), t in zip(expected.items(), state):
        if not isinstance(t, torch.Tensor) or tuple(t.shape) != shape or not t.is_floating_point():
            _fail(f"initial_state.{name} must be a float tensor of shape {shape}, got {_shape(t)}")
        if t.device != q.device:
            _fail(f"initial_state.{name} is on {t.device}, q on {q.device}")
    return state
