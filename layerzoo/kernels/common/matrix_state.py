"""What the families whose state is one (K, V) matrix per head share: the gated delta rule, SSD
(scalar-decay linear attention) and KDA (the delta rule with a decay per key channel).

Each of them takes q, k (B, T, H, K), v (B, T, H, V), gates along (B, T, H[, K]) and a state
(B, H, K, V); runs a step loop ("reference"), a chunked PyTorch kernel ("chunkwise"), its compiled
CPU kernel ("native") or flash-linear-attention's Triton kernel ("fla", CUDA only, which takes
packed sequences itself); and keeps its state in fp32 (fp64 for fp64 inputs). Their public
functions check inputs, choose a backend and run it through these helpers, so the three differ
only in their math.

SSD's and KDA's compiled CPU kernel is a forward only (their gradients are the chunkwise PyTorch
code's): a `cpu_forward.cpp` beside their chunkwise.py registers one op,
torch.ops.layerzoo.<family>_forward(q, k, v, *gates, scale, initial_state, chunk) -> (out, final
state), without side effects: inputs (B, T, H, D) read with their strides in fp32 or fp64, the
state (B * H, K, V). It runs where no gradient is needed (inference, or torch.no_grad);
LAYERZOO_NATIVE=0 or a failed build leave the PyTorch code everywhere.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Callable, Mapping

import torch

from .backends import Backend, autograd_records, choose_backend, installed, require_cpu
from .checks import check_chunk_size, check_cu_seqlens, check_finite_decay, check_tensors
from .dtypes import compute_dtype
from .native_build import CompiledOps, compiled_ops
from .sequences import carried_state, empty_output, has_tokens, per_sequence, without_empty_sequences

KERNELS = Path(__file__).parent.parent


def call(op: str, layouts: Mapping[str, tuple[torch.Tensor, str]], backends: Mapping[str, Backend],
         choose: Callable[[torch.Tensor, bool], str], *, scale: float | None, initial_state: torch.Tensor | None,
         output_final_state: bool, chunk_size: int, cu_seqlens: torch.Tensor | None):
    """A family's public function: check the inputs, choose a backend, run it.

    layouts: name -> (tensor, layout) of every input but the state, as the backends name them, with
    q first, g among them and dims named B T H K V (check_inputs). Every backend takes them, scale
    and initial_state by keyword, and chunk_size and bounds (packed sequences at once) where its
    Backend says so. choose(q, differentiable) -> the backend's name (raising for a bad one),
    differentiable: whether autograd records the call. scale defaults to K ** -0.5. Returns out,
    or (out, final state) with output_final_state.
    """
    bounds = check_inputs(op, layouts, initial_state, chunk_size, cu_seqlens)
    inputs = {name: t for name, (t, _) in layouts.items()}
    q = inputs["q"]
    name = choose(q, autograd_records(*inputs.values(), initial_state))
    check_finite_decay(op, "g", inputs["g"], name)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)
    out, state = run(backends[name], inputs, initial_state, bounds, scale=scale, chunk_size=chunk_size)
    return (out, state) if output_final_state else out


def check_inputs(op: str, layouts: Mapping[str, tuple[torch.Tensor, str]], initial_state: torch.Tensor | None,
                 chunk_size: int, cu_seqlens: torch.Tensor | None) -> list[int] | None:
    """One-line ValueErrors "<op>: ..." for inputs that do not fit; the offsets of packed sequences
    as ints, or None without cu_seqlens.

    layouts: name -> (tensor, layout) of every input but the state, as check_tensors takes them,
    with dims named B T H K V; q, k and v must share one dtype. The state is (B, H, K, V), or
    (N, H, K, V), a row per sequence, with cu_seqlens.
    """
    rows = "B" if cu_seqlens is None else "N"  # packed: a state row per sequence
    sizes = check_tensors(op, {**layouts, "initial_state": (initial_state, f"{rows} H K V")},
                          same_dtype=("q", "k", "v"))
    check_chunk_size(op, chunk_size)
    return check_cu_seqlens(op, cu_seqlens, sizes, layouts["q"][0].device)


def choose(kind: str, q: torch.Tensor, backend: str, backends: Mapping[str, Backend], compiled: CompiledOps, *,
           fla_takes: bool = True, native_takes: bool = True) -> str:
    """The backend a call on q runs: `backend` when it names one of `backends`; for "auto",
    "reference" for a single token (one step: decoding), "fla" where it runs (installed, CUDA, not
    fp64, and fla_takes: what else the family's fla kernel needs), "native" on the CPU where the
    family's `compiled` kernel builds and native_takes (a forward-only kernel does not take a call
    autograd records), else "chunkwise".

    Raises a one-line ValueError for an unknown name, for "fla" where fla is not installed or q is
    not on CUDA, or for "native" off the CPU; `kind` names what is chosen ("SSD backend").
    """

    def fast() -> str:
        if fla_takes and installed("fla") and q.is_cuda and q.dtype != torch.float64:
            return "fla"
        return "native" if native_takes and compiled.ops_for(q) is not None else "chunkwise"

    name = choose_backend(kind, backend, backends, fast, length=q.shape[1])
    if name == "fla" and not installed("fla"):
        raise ValueError("the 'fla' backend needs flash-linear-attention (pip install 'layerzoo[cuda]')")
    if name == "fla" and not q.is_cuda:
        raise ValueError(f"the 'fla' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA")
    if name == "native":
        require_cpu(q)
    return name


def run(backend: Backend, inputs: Mapping[str, torch.Tensor], initial_state: torch.Tensor | None,
        bounds: list[int] | None, *, scale: float, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A backend on validated inputs {q, k, v, gates...}: (out (B, T, H, V) in q's dtype, final state).

    Packed sequences (bounds): a backend that takes them gets them at once; any other runs once
    per sequence, on its state row. A call without tokens (B = 0 or T = 0) passes the state on.
    """
    if bounds is None or "bounds" in backend.takes:
        return _run(backend, inputs, initial_state, bounds, scale, chunk_size)

    def one_sequence(pieces, rows):
        out, state = _run(backend, dict(zip(inputs, pieces)), None if rows is None else rows[0], None, scale, chunk_size)
        return out, [state]

    state = None if initial_state is None else [initial_state]
    out, (state,) = per_sequence(one_sequence, [(t, bounds) for t in inputs.values()], state)
    return out, state


def _run(backend: Backend, inputs: Mapping[str, torch.Tensor], initial_state: torch.Tensor | None,
         bounds: list[int] | None, scale: float, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    if has_tokens(q):
        return backend(**inputs, scale=scale, initial_state=initial_state,
                       optional={"chunk_size": chunk_size, "bounds": bounds})
    rows = k.shape[0] if bounds is None else len(bounds) - 1
    shape = (rows, *k.shape[2:], v.shape[-1])
    (state,) = carried_state(None if initial_state is None else [initial_state], [shape], q)
    return empty_output(q, v.shape[-1]), state


def fla_packed(call: Callable[[torch.Tensor | None, dict], tuple[torch.Tensor, torch.Tensor]],
               initial_state: torch.Tensor | None, bounds: list[int] | None, state_shape: tuple[int, ...],
               like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """An fla kernel on packed sequences, or on a batch (bounds None).

    call(initial_state or None, packed) -> (out, final state) runs the kernel, with packed the
    keywords fla takes for packed sequences ({} for a batch): cu_seqlens, and its host copy, which
    spares fla a device sync to find its chunks. fla's kernels are not written for sequences
    without a token: those are left out and their state rows (N, *state_shape, fp32) pass
    through. like: a tensor on the inputs' device.
    """
    if bounds is None:
        return call(initial_state, {})

    def packed(offsets, state):
        host = torch.tensor(offsets, dtype=torch.int64)
        return call(state, {"cu_seqlens": host.to(like.device), "cu_seqlens_cpu": host})

    if all(end > start for start, end in zip(bounds, bounds[1:])):
        return packed(bounds, initial_state)
    state = like.new_zeros((len(bounds) - 1, *state_shape), dtype=torch.float32) if initial_state is None \
        else initial_state.float()
    return without_empty_sequences(packed, bounds, state)


def compiled_forward(family: str, what: str) -> CompiledOps:
    """The compiled forward of kernels/<family>/cpu_forward.cpp, built on first use; `what` names it
    in log lines ("KDA forward"). Its fake, for torch.compile and torch.export (which trace with
    tensors that carry no data), is registered when it loads."""

    @functools.cache
    def register_for_tracing():
        torch.library.register_fake(f"layerzoo::{family}_forward")(_forward_fake)

    return compiled_ops(family, [KERNELS / family / "cpu_forward.cpp"], [KERNELS / "common" / "native_common.h"], what,
                        register_for_tracing)


def _forward_fake(q, k, v, *gates_scale_state_chunk):
    """(out (B, T, H, V), final state like initial_state (B * H, K, V)), new and contiguous, as
    every cpu_forward.cpp allocates them."""
    initial_state = gates_scale_state_chunk[-2]
    return v.new_empty(*k.shape[:3], v.shape[-1]), torch.empty_like(initial_state)


def run_compiled_forward(compiled: CompiledOps, family: str, inputs: tuple[torch.Tensor, ...],
                         initial_state: torch.Tensor | None, scale: float,
                         chunk: int) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(out (B, T, H, V) in q's dtype, final state (B, H, K, V) in the compute dtype) from the
    compiled forward, or None where it does not run: off CPU, turned off or not built, or when
    some input or the initial state needs a gradient. inputs: q, k, v and the family's gates, in
    its op's order, T >= 1; initial_state (B, H, K, V) or None."""
    native = None if autograd_records(*inputs, initial_state) else compiled.ops_for(inputs[0])
    if native is None:
        return None
    q, k, v = inputs[:3]
    batch, _, heads, key_dim = k.shape
    dtype = compute_dtype(q.dtype)
    state = q.new_zeros(batch * heads, key_dim, v.shape[-1], dtype=dtype) if initial_state is None \
        else initial_state.to(dtype).reshape(batch * heads, key_dim, -1).contiguous()
    # a cast copies narrower inputs; fp32 ones are read where they are, with their strides
    out, state = getattr(native, f"{family}_forward")(*(t.to(dtype) for t in inputs), scale, state, chunk)
    return out.to(q.dtype), state.view(batch, heads, key_dim, -1)
