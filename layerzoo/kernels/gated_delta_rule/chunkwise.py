"""The gated delta rule chunk by chunk, as one autograd Function.

chunk_forward.py has the algorithm in PyTorch, chunk_backward.py its gradient. Writing the
backward by hand lets the forward run in place (autograd would have to keep every intermediate)
and lets the backward recompute cheap intermediates instead of storing them (the benchmarks
page's Gated DeltaNet table, docs/benchmarks.md, measures what that buys).

Two implementations share one workspace (what the forward keeps for the backward):
- PyTorch: the forward takes a group of chunks at a time (GROUP_BYTES of intermediates), from
  copying them into the chunk-major layout to writing their output, so that the group's
  intermediates are still in cache when the state loop and the outputs read them; the backward
  runs on chunk-major copies of everything at once;
- compiled, for the "native" backend (cpu_forward.cpp, cpu_backward.cpp, built on first use by
  native.py, which passes their `ops`): a head per thread, chunk by chunk in cache, inputs read
  with their strides, so no step waits on the others and no input is copied.
Without autograd, either forward needs memory for its inputs and output plus a constant.
"""

from __future__ import annotations

import functools

import torch

from ..common.backends import autograd_records
from ..common.chunks import to_chunks, unchunk_into
from ..common.dtypes import compute_dtype
from .chunk_backward import chunk_backward
from .chunk_forward import chunk_forward, workspace, workspace_bytes_per_chunk

# Bytes of intermediates per group of chunks: about what a CPU core's share of cache holds. Larger
# groups gain nothing; smaller ones pay the per-group overheads.
GROUP_BYTES = 16 * 2**20


def gated_delta_rule_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
    ops=None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule with chunks of `chunk_size` tokens (fewer when T is shorter).

    All arithmetic runs in the state's dtype, fp32 (fp64 for fp64 inputs). Differentiable in
    every input. Inputs are not validated here; `gated_delta_rule(...)` validates.

    Args:
        q: (B, T, H, K) queries, any float dtype; T >= 1.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H) log decay (<= 0).
        beta: (B, T, H) write strength.
        scale: the factor on q (the public function's default is K ** -0.5).
        initial_state: (B, H, K, V), or None for zeros.
        chunk_size: tokens per chunk, an int >= 1.
        ops: the compiled kernel's operators (native.py) to run the forward and backward with;
            None: PyTorch.

    Returns:
        The pair (o, final_state): o (B, T, H, V) in q's dtype, the state (B, H, K, V) in fp32
            (fp64 for fp64 inputs).
    """
    chunk = min(chunk_size, q.shape[1])
    inputs = (q, k, v, g, beta, initial_state)
    return _ChunkwiseGatedDeltaRule.apply(*inputs, scale, chunk, autograd_records(*inputs), ops)


class _ChunkwiseGatedDeltaRule(torch.autograd.Function):
    @staticmethod
    # autograd runs forward without grad; torch.export inlines it into a graph that may run with
    # grad on, where the in-place kernels (matmul out=) would fail: no_grad goes into that graph too
    @torch.no_grad()
    def forward(ctx, q, k, v, g, beta, initial_state, scale, chunk, differentiable, ops):
        batch, _, heads, key_dim = k.shape
        dtype = compute_dtype(q.dtype)
        state = q.new_zeros(batch * heads, key_dim, v.shape[-1], dtype=dtype)
        if initial_state is not None:
            state.copy_(initial_state.reshape(state.shape))
        run = _grouped_forward if ops is None else functools.partial(_native_forward, ops)
        out, state, space = run(q, k, v, g, beta, state, scale, chunk, differentiable)
        if differentiable:
            ctx.save_for_backward(q, k, v, g, beta, *space)
            ctx.scale, ctx.ops = scale, ops
            ctx.state_dtype = None if initial_state is None else initial_state.dtype
        return out, state.view(batch, heads, key_dim, -1)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_final_state):
        *inputs, states, v_new, w, inverse = ctx.saved_tensors
        run = _chunked_backward if ctx.ops is None else functools.partial(_native_backward, ctx.ops)
        d_state = d_final_state.to(states.dtype).flatten(0, 1).contiguous()
        d_inputs, d_state = run(inputs, ctx.scale, (states, v_new, w, inverse), d_out, d_state)
        d_state = None if ctx.state_dtype is None else d_state.view_as(d_final_state).to(ctx.state_dtype)
        return *d_inputs, d_state, None, None, None, None


def _native_backward(native, inputs, scale, kept, d_out, d_state):
    """The compiled CPU backward (native.py): (gradients of q, k, v, g, beta in their dtypes, that of
    the initial state (BH, K, V)). It reads inputs and d_out with their strides; d_state (BH, K, V)
    is the final state's gradient; kept, the forward's workspace, sets the chunk size."""
    dtype = d_state.dtype
    *grads, d_initial = native.gated_delta_rule_backward(
        *(t.to(dtype) for t in inputs), scale, *kept, d_out.to(dtype), d_state)
    return [grad.to(t.dtype) for grad, t in zip(grads, inputs)], d_initial


def _chunked_backward(inputs, scale, kept, d_out, d_state):
    """chunk_backward.py on chunk-major copies of the inputs and d_out: as _native_backward."""
    dtype, chunk = d_state.dtype, kept[-1].shape[-1]  # the kept (I + A)^-1 is (N, BH, C, C)
    grads = chunk_backward(*(to_chunks(t, chunk, dtype) for t in inputs), scale, *kept, to_chunks(d_out, chunk, dtype), d_state)
    d_inputs = []
    for grad, t in zip(grads[:5], inputs):
        d_inputs.append(t.new_empty(t.shape))
        unchunk_into(d_inputs[-1], grad)
    return d_inputs, grads[5]


def _native_forward(native, q, k, v, g, beta, state, scale, chunk, keep):
    """The compiled CPU forward (native.py): (out in q's dtype, final state, workspace or None).

    It reads the inputs with their own strides, in the compute dtype: a cast copies narrower
    inputs. state (BH, K, V) is the initial state; the final one is a new tensor (native_ops.py:
    the op without side effects, so that torch.compile can trace it).
    """
    inputs = [t.to(state.dtype) for t in (q, k, v, g, beta)]
    out, state, *space = native.gated_delta_rule_forward_functional(*inputs, scale, state, chunk, keep)
    return out.to(q.dtype), state, space if keep else None


def _grouped_forward(q, k, v, g, beta, state, scale, chunk, keep):
    """The PyTorch forward, a group of chunks at a time (see the module docstring): (out in q's
    dtype, final state, workspace or None). state (BH, K, V) is the initial state."""
    batch, length, heads, key_dim = k.shape
    value_dim, dtype = v.shape[-1], state.dtype
    n_chunks = -(-length // chunk)
    out = q.new_empty(batch, length, heads, value_dim)
    per_chunk = workspace_bytes_per_chunk(batch * heads, chunk, key_dim, value_dim, state.element_size())
    group = min(n_chunks, max(1, GROUP_BYTES // per_chunk))
    # kept for the backward: one workspace for all chunks; else one group's, reused by every group
    states, *rest = space = workspace(state, n_chunks if keep else group, chunk, key_dim, value_dim)
    for first in range(0, n_chunks, group):
        size = min(group, n_chunks - first)
        tokens = slice(first * chunk, min((first + size) * chunk, length))
        chunked = [to_chunks(t[:, tokens], chunk, dtype) for t in (q, k, v, g, beta)]
        offset = first if keep else 0
        work = (states[offset:offset + size + 1], *(t[offset:offset + size] for t in rest))
        work[0][0] = state  # when kept it already is: the previous group's last state
        unchunk_into(out[:, tokens], chunk_forward(*chunked, scale, *work))
        state = work[0][-1]
    return out, state.clone(), space if keep else None
