"""Input checks every family runs before its backends: tensors against their layouts, chunk sizes,
finite decays, and the offsets of packed sequences (cu_seqlens). Each failure is a one-line
ValueError "<op>: ..."."""

from __future__ import annotations

from typing import Mapping, Sequence

import torch

from .backends import REFERENCE


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


def check_finite_decay(op: str, name: str, log_decay: torch.Tensor, backend: str, *, gate: bool = False) -> None:
    """A one-line ValueError when a log decay holds +inf, or -inf (a full reset) on a chunked backend.

    A log decay is <= 0 (the log of a factor in (0, 1]): +inf has no meaning, and the arithmetic
    turns it into NaN, not the same NaN on every backend; gate=True is for a gate's
    pre-activation (mLSTM f, whose decay is sigmoid(f)), where +inf is a factor of 1. The step
    loop multiplies by exp(-inf) = 0; a chunked kernel subtracts cumulative sums of log decays,
    and -inf - -inf is NaN. A reset is where one sequence ends and the next begins, which is what
    the reference backend or one call per sequence expresses. One read of the data (a device
    sync on CUDA) where there is nothing to refuse; skipped while tracing (torch.compile).
    """
    if torch.compiler.is_compiling():
        return
    chunked = backend != REFERENCE
    if gate:  # only a reset can be refused, and only by a chunked backend
        refused = log_decay.isneginf() if chunked else None
    else:  # one test for both infinities, which tell apart only once one is there
        refused = log_decay.isinf() if chunked else log_decay.isposinf()
    if refused is None or not bool(refused.any()):
        return
    if not gate and bool(log_decay.isposinf().any()):
        _fail(op, f"{name} holds +inf; a log decay is <= 0 (the log of a factor in (0, 1])")
    _fail(op, f"{name} holds -inf (a full reset), which the {backend!r} backend cannot take; "
              "split the sequence there or use backend='reference'")


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


def _shown(bounds: list[int], most: int = 8) -> str:
    """Offsets for an error message, elided past `most`."""
    if len(bounds) <= most:
        return str(bounds)
    return "[" + ", ".join(map(str, bounds[:most // 2])) + ", ..., " + ", ".join(map(str, bounds[-most // 2:])) + "]"


def _fail(op: str, message: str):
    raise ValueError(f"{op}: {message}")
