"""Compiled CPU forwards of the matrix-state families that keep a PyTorch backward (SSD, KDA).

Each such family has a `cpu_forward.cpp` (beside its chunkwise.py) that registers one op,
torch.ops.layerzoo.<family>_forward(q, k, v, *gates, scale, initial_state, chunk) -> (out, final
state), without side effects: inputs (B, T, H, D) read with their strides in fp32 or fp64, the
state (B * H, K, V). The chunkwise kernel runs it where no gradient is needed (inference, or
torch.no_grad) and its own autograd-differentiated PyTorch code otherwise, so gradients are
PyTorch's; LAYERZOO_NATIVE=0 or a failed build leave the PyTorch code everywhere.
"""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from .dtypes import compute_dtype
from .native_build import CompiledOps, compiled_ops

KERNELS = Path(__file__).parent.parent


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
    needs_grad = torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (*inputs, initial_state))
    native = None if needs_grad else compiled.ops_for(inputs[0])
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
