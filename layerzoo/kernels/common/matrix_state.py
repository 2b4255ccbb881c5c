"""What the families whose state is one (K, V) matrix per head share: the gated delta rule, SSD
(scalar-decay linear attention) and KDA (the delta rule with a decay per key channel).

Each of them takes q, k (B, T, H, K), v (B, T, H, V), gates along (B, T, H[, K]) and a state
(B, H, K, V); runs a step loop ("reference"), a chunked PyTorch kernel ("chunkwise") or
flash-linear-attention's Triton kernel ("fla", CUDA only, which takes packed sequences itself);
and keeps its state in fp32 (fp64 for fp64 inputs). Their public functions check inputs, choose a
backend and run it through these helpers, so the three differ only in their math.
"""

from __future__ import annotations

from typing import Callable, Mapping

import torch

from .backends import choose_backend, installed
from .checks import check_chunk_size, check_cu_seqlens, check_finite_decay, check_tensors
from .empty import carried_state, empty_output, has_tokens
from .sequences import per_sequence, without_empty_sequences

# A backend as these helpers call it: run(*inputs, initial_state, bounds=None) -> (out, final state),
# on validated inputs with B, T >= 1; bounds (the offsets of packed sequences, B = 1) only when the
# backend takes packed sequences itself.
Run = Callable[..., "tuple[torch.Tensor, torch.Tensor]"]


def call(op: str, layouts: Mapping[str, tuple[torch.Tensor, str]], backends: Mapping[str, Callable],
         packed_backends: tuple[str, ...], choose_name: Callable[[torch.Tensor], str], *, scale: float | None,
         initial_state: torch.Tensor | None, output_final_state: bool, chunk_size: int,
         cu_seqlens: torch.Tensor | None):
    """A family's public function: check the inputs, choose a backend, run it.

    layouts: name -> (tensor, layout) of every input but the state, in the backends' order, with
    q first, g among them and dims named B T H K V (check_inputs); backends[name](*inputs, scale,
    initial_state, chunk_size[, bounds=]) -> (out, final state), those in packed_backends taking
    packed sequences themselves; choose_name(q) -> the backend's name (raising for a bad one).
    scale defaults to K ** -0.5. Returns out, or (out, final state) with output_final_state.
    """
    bounds = check_inputs(op, layouts, initial_state, chunk_size, cu_seqlens)
    q = layouts["q"][0]
    name = choose_name(q)
    check_finite_decay(op, "g", layouts["g"][0], name)
    scale = q.shape[-1] ** -0.5 if scale is None else float(scale)

    def chosen(*inputs, **packed):
        return backends[name](*inputs[:-1], scale, inputs[-1], chunk_size, **packed)

    out, state = run(chosen, [t for t, _ in layouts.values()], initial_state, bounds, takes_packed=name in packed_backends)
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


def choose(kind: str, q: torch.Tensor, backend: str, backends: Mapping[str, Run], fla_takes: bool = True) -> str:
    """The backend a call on q runs: `backend` when it names one of `backends`; for "auto",
    "reference" for a single token (one step: decoding), "fla" where it runs (installed, CUDA, not
    fp64, and fla_takes: what else the family's fla kernel needs), else "chunkwise".

    Raises a one-line ValueError for an unknown name, or for "fla" where fla is not installed or
    q is not on CUDA; `kind` names what is chosen ("SSD backend").
    """
    fla_runs = fla_takes and installed("fla") and q.is_cuda and q.dtype != torch.float64
    name = choose_backend(kind, backend, backends, "fla" if fla_runs else "chunkwise", length=q.shape[1])
    if name == "fla" and not installed("fla"):
        raise ValueError("the 'fla' backend needs flash-linear-attention (pip install 'layerzoo[cuda]')")
    if name == "fla" and not q.is_cuda:
        raise ValueError(f"the 'fla' backend needs CUDA tensors, got {q.device}; use 'chunkwise' off CUDA")
    return name


def run(backend: Run, inputs: list[torch.Tensor], initial_state: torch.Tensor | None, bounds: list[int] | None,
        takes_packed: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """A backend on validated inputs [q, k, v, gates...]: (out (B, T, H, V) in q's dtype, final state).

    Packed sequences (bounds): a backend that takes_packed gets them at once; any other runs once
    per sequence, on its state row. A call without tokens (B = 0 or T = 0) passes the state on.
    """
    if bounds is None or takes_packed:
        return _run(backend, inputs, initial_state, bounds)

    def one_sequence(pieces, rows):
        out, state = _run(backend, pieces, None if rows is None else rows[0])
        return out, [state]

    state = None if initial_state is None else [initial_state]
    out, (state,) = per_sequence(one_sequence, [(t, bounds) for t in inputs], state)
    return out, state


def _run(backend: Run, inputs: list[torch.Tensor], initial_state: torch.Tensor | None,
         bounds: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    q, k, v = inputs[:3]
    if has_tokens(q):
        packed = {} if bounds is None else {"bounds": bounds}
        return backend(*inputs, initial_state, **packed)
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
