"""The mLSTM's public function, its backend choice and its backends by name.

Backends: "reference" (the step loop), "chunkwise" (PyTorch), "native" (the compiled CPU forward;
a call autograd records runs chunkwise), "triton" (kernels in triton/, for CUDA; imported on first
use). Packed sequences (cu_seqlens): "chunkwise" and "native" take them in one pass
(chunkwise.py); the others run once per sequence.
"""

from __future__ import annotations

import torch

from ..common.backends import Backend, autograd_records, choose_backend, require_cpu, taking, triton_can_run
from ..common.checks import check_chunk_size, check_cu_seqlens, check_finite_decay, check_tensors
from ..common.sequences import carried_state, empty_output, has_tokens, per_sequence
from .chunkwise import mlstm_chunkwise
from .native import COMPILED, mlstm_native
from .reference import MLSTMState, mlstm_reference
from .triton import mlstm_triton

BACKENDS = {
    "reference": Backend(mlstm_reference),
    "chunkwise": Backend(mlstm_chunkwise, takes=("chunk_size", "bounds")),
    "native": Backend(mlstm_native, takes=("chunk_size", "bounds")),
    "triton": Backend(mlstm_triton, takes=("chunk_size",)),
}
PACKED = taking(BACKENDS, "bounds")


def choose_mlstm_backend(q: torch.Tensor, backend: str = "auto", *, differentiable: bool = False) -> str:
    """The backend `mlstm(q, ..., backend=backend)` runs.

    "auto" is "reference" for a single token (one step: decoding), "triton" for CUDA tensors when
    Triton is installed, "native" on the CPU where it builds and autograd does not record the
    call, else "chunkwise" (on CPU the Triton interpreter would be far slower than PyTorch).
    Raises ValueError for an unknown name.

    Args:
        q: (B, T, H, Dk) queries, as mlstm takes them (their device and T decide).
        backend: "auto" or a key of BACKENDS ("reference", "chunkwise", "native", "triton").
        differentiable: whether autograd records the call (the compiled forward has no backward).

    Returns:
        The backend's name, a key of BACKENDS.

    Raises:
        ValueError: an unknown name; "native" off the CPU.
    """

    def fast() -> str:
        if q.is_cuda and triton_can_run(q):
            return "triton"
        return "native" if not differentiable and COMPILED.ops_for(q) is not None else "chunkwise"

    name = choose_backend("mLSTM backend", backend, BACKENDS, fast, length=q.shape[1])
    if name == "native":
        require_cpu(q)
    return name


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
    cu_seqlens: torch.Tensor | None = None,
):
    """The stabilised mLSTM over a sequence, or over packed sequences.

    The input gate is exp(i), the forget gate sigmoid(f). Any B, T >= 0; gradients reach every
    input, the initial state included. States and arithmetic are fp32 whatever the input dtype
    (fp64 for fp64 inputs).

    Args:
        q: (B, T, H, Dk) queries, float (fp32, bf16, fp16 or fp64), one dtype with k and v.
        k: (B, T, H, Dk) keys.
        v: (B, T, H, Dv) values.
        i: (B, T, H) input gate pre-activations, any float dtype.
        f: (B, T, H) forget gate pre-activations, any float dtype.
        initial_state: None (the empty state, all zeros) or an MLSTMState / (C, n, m) tuple with
            C (B, H, Dk, Dv), n (B, H, Dk), m (B, H).
        output_final_state: also return the state after the last token.
        chunk_size: tokens per chunk of the chunkwise backends, an int >= 1 (any T, no multiple
            needed; "triton" rounds it up to a power of two in [16, 128], [16, 64] before sm_90).
        backend: "auto" (see choose_mlstm_backend) or a key of BACKENDS: "reference" (the step
            loop), "chunkwise" (PyTorch), "native" (compiled CPU forward), "triton" (CUDA).
        cu_seqlens: None, or packed sequences in flash-linear-attention's convention: B = 1, and
            a 1-D int32/int64 tensor of offsets [0, l1, l1 + l2, ..., T] on q's device (empty
            sequences allowed). Then initial_state and the final state hold N = len(cu_seqlens) - 1
            rows, one per sequence, in place of B, and each sequence runs as if called alone (an
            empty one passes its state on).

    Returns:
        h (B, T, H, Dv) in q's dtype; with output_final_state, the pair (h, final MLSTMState),
            its C, n, m of B rows (N with cu_seqlens) in fp32 (fp64 for fp64 inputs).

    Raises:
        ValueError: (one line, before any work) a tensor of the wrong shape, not floating point or
            on another device; q, k, v of different dtypes; an initial_state that is neither an
            MLSTMState nor a (C, n, m) tuple; a chunk_size that is not an int >= 1; malformed
            cu_seqlens; f holding -inf on a chunked backend; an unknown backend, "native" off
            the CPU, or "triton" where it cannot run.
    """
    initial_state, bounds = _check_inputs(q, k, v, i, f, initial_state, chunk_size, cu_seqlens)
    differentiable = autograd_records(q, k, v, i, f, *(initial_state or ()))
    name = choose_mlstm_backend(q, backend, differentiable=differentiable)
    check_finite_decay("mlstm", "f", f, name, gate=True)
    if bounds is None or name in PACKED:
        h, state = _run(BACKENDS[name], q, k, v, i, f, initial_state, chunk_size, bounds)
    else:
        def one_sequence(inputs, rows):
            return _run(BACKENDS[name], *inputs, None if rows is None else MLSTMState(*rows), chunk_size)

        h, state = per_sequence(one_sequence, [(t, bounds) for t in (q, k, v, i, f)], initial_state)
        state = MLSTMState(*state)
    return (h, state) if output_final_state else h


def _run(backend: Backend, q, k, v, i, f, initial_state, chunk_size, bounds=None) -> tuple[torch.Tensor, MLSTMState]:
    """A backend on validated inputs; a call without tokens passes the state on."""
    if has_tokens(q):
        return backend(q=q, k=k, v=v, i=i, f=f, initial_state=initial_state,
                       optional={"chunk_size": chunk_size, "bounds": bounds})
    rows, _, heads, key_dim = q.shape
    rows = rows if bounds is None else len(bounds) - 1
    value_dim = v.shape[-1]
    shapes = [(rows, heads, key_dim, value_dim), (rows, heads, key_dim), (rows, heads)]
    return empty_output(q, value_dim), MLSTMState(*carried_state(initial_state, shapes, q))


def _check_inputs(q, k, v, i, f, initial_state, chunk_size, cu_seqlens) -> tuple[MLSTMState | None, list[int] | None]:
    """One-line ValueErrors for inputs that do not fit; the initial state as an MLSTMState (or
    None) and the offsets of packed sequences (or None)."""
    if initial_state is not None and not isinstance(initial_state, MLSTMState):
        if not isinstance(initial_state, (tuple, list)) or len(initial_state) != 3:
            kind = type(initial_state).__name__
            raise ValueError(f"mlstm: initial_state must be an MLSTMState or a (C, n, m) tuple, got {kind}")
        initial_state = MLSTMState(*initial_state)
    C, n, m = (None, None, None) if initial_state is None else initial_state
    rows = "B" if cu_seqlens is None else "N"  # packed: a state row per sequence
    sizes = check_tensors("mlstm", {
        "q": (q, "B T H Dk"), "k": (k, "B T H Dk"), "v": (v, "B T H Dv"), "i": (i, "B T H"), "f": (f, "B T H"),
        "initial_state.C": (C, f"{rows} H Dk Dv"), "initial_state.n": (n, f"{rows} H Dk"), "initial_state.m": (m, f"{rows} H"),
    }, same_dtype=("q", "k", "v"))
    check_chunk_size("mlstm", chunk_size)
    return initial_state, check_cu_seqlens("mlstm", cu_seqlens, sizes, q.device)
