"""The "native" backend: the chunkwise mLSTM's compiled CPU forward (cpu_forward.cpp), built on
first use by native_build.py, and how torch.compile sees it.

It runs where no gradient is wanted (inference, evaluation, generation's prefill); a forward that
autograd records runs chunkwise.py's PyTorch code, whose backward autograd derives.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..common.backends import autograd_records
from ..common.dtypes import compute_dtype
from ..common.native_build import compiled_ops
from .chunkwise import mlstm_chunkwise
from .reference import EPS, MLSTMState

HERE = Path(__file__).parent


def mlstm_native(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: torch.Tensor, f: torch.Tensor,
                 initial_state: MLSTMState | None = None, chunk_size: int = 64, *,
                 bounds: list[int] | None = None) -> tuple[torch.Tensor, MLSTMState]:
    """The mLSTM by the compiled forward, as mlstm_chunkwise takes and returns it (packed sequences
    too); mlstm_chunkwise itself where a gradient is wanted (the compiled kernel has no backward),
    off the CPU or where it is turned off (LAYERZOO_NATIVE=0) or cannot be built."""
    compiled = native_forward(q, k, v, i, f, initial_state, chunk_size, bounds)
    if compiled is None:
        return mlstm_chunkwise(q, k, v, i, f, initial_state, chunk_size, bounds=bounds)
    return compiled


def native_forward(q, k, v, i, f, initial_state: MLSTMState | None, chunk: int,
                   bounds: list[int] | None) -> tuple[torch.Tensor, MLSTMState] | None:
    """The mLSTM by the compiled CPU forward, as mlstm_chunkwise's contract has it (its shapes,
    bounds for packed sequences); None where it does not run: not on CPU, turned off or not built,
    or a gradient wanted. Inputs are read with their strides, in the compute dtype (a cast copies
    narrower ones); h comes back in q's dtype."""
    if autograd_records(q, k, v, i, f, *(initial_state or ())) or q.device.type != "cpu" or not COMPILED.enabled():
        return None
    batch, length, heads, key_dim = q.shape
    dtype = compute_dtype(q.dtype)
    offsets = [0, length] if bounds is None else bounds
    if initial_state is None:
        rows = batch * (len(offsets) - 1)
        initial_state = MLSTMState.empty(rows, heads, key_dim, v.shape[-1], dtype)
    inputs = [t.to(dtype) for t in (q, k, v, i, f, *initial_state)]
    h, C, n, m = torch.ops.layerzoo.mlstm_forward(*inputs, offsets, chunk, EPS)
    return h.to(q.dtype), MLSTMState(C, n, m)


@functools.cache
def register_for_tracing() -> None:
    """Register the fake, once per process, after the op loads (torch checks that it exists), and
    not at import: that imports torch's Triton support, which `import layerzoo` must not."""
    torch.library.register_fake("layerzoo::mlstm_forward")(forward_fake)


def forward_fake(q, k, v, i, f, C, n, m, offsets, chunk, eps):
    """What the compiled forward returns, for tracing with fake tensors: [h (B, T, H, Dv), C, n, m
    like the initial state's], new and contiguous, in the inputs' dtype."""
    batch, length, heads, _ = q.shape
    return [v.new_empty(batch, length, heads, v.shape[-1])] + [t.new_empty(t.shape) for t in (C, n, m)]


COMPILED = compiled_ops("mlstm", [HERE / "cpu_forward.cpp"], [HERE.parent / "common" / "native_common.h"], "mLSTM",
                        register_for_tracing)
