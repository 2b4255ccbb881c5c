"""What every kernel family does the same way: the compute dtype, the backend choice (and which
optional libraries are there to choose from), input checks, calls without tokens, and packed
sequences (cu_seqlens): their checks and running a backend once per sequence.

Each family's public function (its folder's __init__.py) runs these around its backends, so a
backend only ever sees validated inputs with at least one token.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Callable, Iterable, Mapping, Sequence

import torch

from ..errors import unknown_name_message

# The backend every family names its truth (a step loop or a dense mask): `backend="reference"`.
REFERENCE = "reference"


def constant_when_traced(fn: Callable) -> Callable:
    """Mark fn as torch.compiler.assume_constant_result does: torch.compile and strict
    torch.export call it when they trace and keep its result in the graph as a constant, so what
    it does to find the answer (a search of the import path, a build, log lines) stays out.

    It sets the attribute that decorator sets, because the decorator imports torch._dynamo (and
    with it Triton, which must load on first use), doubling the time of `import layerzoo`.
    """
    fn._dynamo_marked_constant = True
    return fn


@constant_when_traced
def installed(package: str) -> bool:
    """Whether an optional package (triton, fla, ...) can be imported, without importing it.
    A constant to torch.compile (see constant_when_traced)."""
    return _on_import_path(package)


@functools.cache
def _on_import_path(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype states and arithmetic use for inputs of `dtype`: fp32, or fp64 for fp64 inputs
    (so tests can use fp64 as the yardstick)."""
    return torch.promote_types(dtype, torch.float32)


def choose_backend(kind: str, backend: str, backends: Iterable[str], fast: str, length: int | None = None) -> str:
    """The backend a call runs: `backend` when it names one of `backends`; for "auto", REFERENCE
    when `length` is 1 (a single token is one step of the loop: the least work, as in decoding;
    length None for families without a step loop), else `fast`.

    Raises a one-line ValueError naming the closest known name for anything else; `kind` names
    what is chosen ("mLSTM backend").
    """
    backends = list(backends)
    if backend != "auto" and backend not in backends:
        raise ValueError(unknown_name_message(kind, backend, [*backends, "auto"]))
    if backend != "auto":
        return backend
    return REFERENCE if length == 1 else fast


def check_tensors(op: str, layouts: Mapping[str, tuple[object, str]], same_dtype: Sequence[str] = ()) -> dict[str, int]:
    """Check that every named input is a floating-point tensor whose shape follows its layout.

    layouts: name -> (value, layout), the layout the names of its dims separated by spaces
    ("B T H K"); a dim name shared by several inputs must have one size (the first input to
    name it sets it). None values (optional inputs left out) are skipped. All tensors must be on
    one device, and those named in same_dtype must share one dtype.
    Raises a one-line ValueError "<op>: ..." naming the first input that breaks a rule; returns
    the size of every dim name.
    """
    sizes: dict[str, int] = {}
    tensors: dict[str, torch.Tensor] = {}
    for name, (t, layout) in layouts.items():
        if t is None:
            continue
        dims = layout.split()
        shown = f"({', '.join(dims)})"
        if not isinstance(t, torch.Tensor):
            _fail(op, f"{name} must be a tensor {shown}, got {type(t).__name__}")
        if t.dim() != len(dims):
            _fail(op, f"{name} must be a {len(dims)}-d tensor {shown}, got shape {tuple(t.shape)}")
        if not t.is_floating_point():
            _fail(op, f"{name} must be a floating-point tensor, got {t.dtype}")
        if any(sizes.get(dim, size) != size for dim, size in zip(dims, t.shape)):
            expected = ", ".join(str(sizes.get(dim, dim)) for dim in dims)
            _fail(op, f"{name} must be {shown} = ({expected}), got {tuple(t.shape)}")
        sizes.update(zip(dims, t.shape))
        tensors[name] = t
    if len({t.device for t in tensors.values()}) > 1:
        _fail(op, "inputs must be on one device, got " + ", ".join(f"{n} on {t.device}" for n, t in tensors.items()))
    shared = {name: tensors[name] for name in same_dtype if name in tensors}
    if len({t.dtype for t in shared.values()}) > 1:
        _fail(op, f"{', '.join(shared)} must share one dtype, got " + ", ".join(str(t.dtype) for t in shared.values()))
    return sizes


def check_chunk_size(op: str, chunk_size: object) -> None:
    """A one-line ValueError unless chunk_size is an integer >= 1."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        _fail(op, f"chunk_size must be an integer >= 1, got {chunk_size!r}")


def check_finite_decay(op: str, name: str, log_decay: torch.Tensor, backend: str) -> None:
    """A one-line ValueError when a chunked backend gets a log decay of -inf (a full reset).

    The step loop multiplies by exp(-inf) = 0; a chunked kernel subtracts cumulative sums of log
    decays, and -inf - -inf is NaN. A reset is where one sequence ends and the next begins, which
    is what the reference backend or one call per sequence expresses. Skipped while tracing
    (torch.compile): the check reads the data.
    """
    if backend != REFERENCE and not torch.compiler.is_compiling() and bool(log_decay.isneginf().any()):
        _fail(op, f"{name} holds -inf (a full reset), which the {backend!r} backend cannot take; "
                  "split the sequence there or use backend='reference'")


def has_tokens(x: torch.Tensor) -> bool:
    """Whether x (B, T, ...) holds a token. Calls without one (B = 0 or T = 0) run no backend."""
    return x.shape[0] > 0 and x.shape[1] > 0


def empty_output(x: torch.Tensor, width: int) -> torch.Tensor:
    """The output of a call without tokens: zeros (B, T, H, width) in x's dtype, for x (B, T, H, ...)."""
    return x.new_zeros(*x.shape[:3], width)


def carried_state(state: Sequence[torch.Tensor] | None, shapes: Sequence[tuple[int, ...]],
                  x: torch.Tensor) -> list[torch.Tensor]:
    """The final state of a call without tokens: the initial state's tensors in the compute dtype
    of x (an identity for autograd where they already are, so gradients pass through), or zeros
    of `shapes` (the empty state) when there is none."""
    dtype = compute_dtype(x.dtype)
    if state is None:
        return [x.new_zeros(shape, dtype=dtype) for shape in shapes]
    return [t.to(dtype) for t in state]


def check_cu_seqlens(op: str, cu_seqlens: object, sizes: Mapping[str, int], device: torch.device, *,
                     name: str = "cu_seqlens", length: str = "T", rows: str | None = "N") -> list[int] | None:
    """The offsets of packed sequences as Python ints, or None without cu_seqlens.

    flash-linear-attention's convention: the inputs hold B = 1 row, sequences one after another
    along the time axis, and cu_seqlens is a 1-D int32 or int64 tensor on the inputs' device of
    offsets [0, l1, l1 + l2, ..., T] (at least one sequence; empty ones may repeat an offset).
    sizes: check_tensors' dim sizes, with "B" the batch, `length` the packed time axis and `rows`
    (when a state was given) the state's leading dim, which must be N = len(cu_seqlens) - 1.
    Raises a one-line ValueError "<op>: <name> ..." for anything else. Reads the offsets to the
    host (a device sync on CUDA), as flash-attn's max_seqlen or fla's chunk indices need too.
    """
    if cu_seqlens is None:
        return None
    expected = f"a 1-D int32 or int64 tensor of offsets [0, l1, l1 + l2, ..., {length}]"
    if not isinstance(cu_seqlens, torch.Tensor):
        _fail(op, f"{name} must be {expected}, got {type(cu_seqlens).__name__}")
    if cu_seqlens.dim() != 1 or cu_seqlens.dtype not in (torch.int32, torch.int64):
        _fail(op, f"{name} must be {expected}, got a {cu_seqlens.dim()}-d {cu_seqlens.dtype} tensor")
    if cu_seqlens.device != device:
        _fail(op, f"{name} must be on the inputs' device {device}, got {cu_seqlens.device}")
    if sizes["B"] != 1:
        _fail(op, f"with {name} the sequences are packed along time: the batch size must be 1, got {sizes['B']}")
    bounds = cu_seqlens.tolist()
    shown = _shown(bounds)
    if len(bounds) < 2:
        _fail(op, f"{name} must hold at least one sequence ([0, {length}]), got {shown}")
    if bounds[0] != 0 or bounds[-1] != sizes[length]:
        _fail(op, f"{name} must run from 0 to {length} = {sizes[length]}, got {shown}")
    if any(end < start for start, end in zip(bounds, bounds[1:])):
        _fail(op, f"{name} must be non-decreasing, got {shown}")
    if rows is not None and rows in sizes and sizes[rows] != len(bounds) - 1:
        _fail(op, f"with {name} the initial state holds one row per sequence: {len(bounds) - 1}, got {sizes[rows]}")
    return bounds


def per_sequence(run: Callable[[list[torch.Tensor], list[torch.Tensor] | None], tuple[torch.Tensor, Sequence[torch.Tensor]]],
                 inputs: Sequence[tuple[torch.Tensor, Sequence[int]]], state: Sequence[torch.Tensor] | None = None,
                 ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """A backend without packed sequences, run once per sequence on views of the packed tensors.

    inputs: (tensor (1, T, ...), its offsets) pairs (attention's queries and keys have their own);
    state: tensors of N rows, or None. run(the sequence's slices (1, l, ...), its state rows
    (1, ...) or None) -> (out (1, l, ...), final state tensors (1, ...)); it must take l = 0.
    Returns the outputs concatenated along time and the final states along rows (N, ...).
    """
    # split, not a slice per sequence: a slice's backward writes a zero tensor as large as the
    # whole input, N of them in all; split's backward is one concatenation.
    pieces = [t.split([end - start for start, end in zip(bounds, bounds[1:])], dim=1) for t, bounds in inputs]
    rows = [None] * len(pieces[0]) if state is None else list(zip(*(t.split(1) for t in state)))
    outputs, states = [], []
    for sequence, sequence_rows in zip(zip(*pieces), rows):
        out, final = run(list(sequence), None if sequence_rows is None else list(sequence_rows))
        outputs.append(out)
        states.append(final)
    return torch.cat(outputs, dim=1), [torch.cat(parts) for parts in zip(*states)]


def without_empty_sequences(run: Callable[[list[int], torch.Tensor], tuple[torch.Tensor, torch.Tensor]],
                            bounds: list[int], state: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A library kernel that takes packed sequences but is not written for empty ones, run on the
    others: an empty sequence's state passes through.

    run(offsets without repeats, the state rows of the non-empty sequences) -> (out, their final
    state rows); state: (N, ...), the initial state (zeros for the empty one) in the dtype of the
    final state. Returns out and the final state (N, ...).
    """
    kept = [index for index, (start, end) in enumerate(zip(bounds, bounds[1:])) if end > start]
    if len(kept) == len(bounds) - 1:
        return run(bounds, state)
    rows = torch.tensor(kept, device=state.device)
    out, final = run(sorted(set(bounds)), state.index_select(0, rows))
    return out, state.index_copy(0, rows, final)


def _shown(bounds: list[int], most: int = 8) -> str:
    """Offsets for an error message, elided past `most`."""
    if len(bounds) <= most:
        return str(bounds)
    return "[" + ", ".join(map(str, bounds[:most // 2])) + ", ..., " + ", ".join(map(str, bounds[-most // 2:])) + "]"


def _fail(op: str, message: str):
    raise ValueError(f"{op}: {message}")
