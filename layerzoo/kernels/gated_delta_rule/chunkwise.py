"""The gated delta rule chunk by chunk in plain PyTorch, as one autograd Function.

chunk_forward.py has the algorithm, chunk_backward.py its gradient. Writing the backward by hand
lets the forward run in place (autograd would have to keep every intermediate) and lets the
backward recompute cheap intermediates instead of storing them: about 1.2x faster forward and
forward+backward than the same algorithm under autograd on CPU.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .chunk_backward import chunk_backward
from .chunk_forward import chunk_forward
from .reference import compute_dtype


def chunkwise_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule with chunks of `chunk_size` tokens (fewer when T is shorter).

    q, k: (B, T, H, K); v: (B, T, H, V); g, beta: (B, T, H); T >= 1; initial_state (B, H, K, V)
    or None. Returns o (B, T, H, V) in q's dtype and the final state (B, H, K, V) in fp32 (fp64
    for fp64 inputs), the dtype all arithmetic runs in. Differentiable in every input.
    """
    chunk = min(chunk_size, q.shape[1])
    return _ChunkwiseGatedDeltaRule.apply(q, k, v, g, beta, initial_state, scale, chunk)


class _ChunkwiseGatedDeltaRule(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, g, beta, initial_state, scale, chunk):
        batch, length, heads, key_dim = k.shape
        dtype = compute_dtype(q.dtype)
        chunked = [_chunks(t, chunk, dtype) for t in (q, k, v, g, beta)]
        if initial_state is None:
            state = q.new_zeros(batch * heads, key_dim, v.shape[-1], dtype=dtype)
        else:
            state = initial_state.to(dtype).reshape(batch * heads, key_dim, v.shape[-1])
        out, states, v_new, w, inverse = chunk_forward(*chunked, scale, state)
        ctx.save_for_backward(*chunked, states, v_new, w, inverse)
        ctx.scale = scale
        ctx.input_dtypes = [t.dtype for t in (q, k, v, g, beta)]
        ctx.state_dtype = None if initial_state is None else initial_state.dtype
        final_state = states[-1].clone().view(batch, heads, key_dim, v.shape[-1])
        return _unchunk(out, batch, length, q.dtype), final_state

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, d_out, d_final_state):
        q, k, v, g, beta, states, v_new, w, inverse = ctx.saved_tensors
        batch, length = d_out.shape[:2]
        chunk = k.shape[2]
        grads = chunk_backward(
            q, k, v, g, beta, ctx.scale, states, v_new, w, inverse,
            _chunks(d_out, chunk, k.dtype), d_final_state.to(k.dtype).flatten(0, 1),
        )
        inputs = [_unchunk(d, batch, length, dtype) for d, dtype in zip(grads[:5], ctx.input_dtypes)]
        d_state = None if ctx.state_dtype is None else grads[5].view_as(d_final_state).to(ctx.state_dtype)
        return *inputs, d_state, None, None


def _chunks(t: torch.Tensor, chunk: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, T, H, *rest) -> contiguous (N, B * H, C, *rest) in `dtype`, zero-padded to N * C steps.

    Chunk-major, so that the loops over chunks read contiguous slices and every matmul folds its
    batch dimensions without copying. Zero padding is inert: a padded step has beta = 0 and
    k = 0, so it writes nothing to the state, and g = 0, so it decays nothing.
    """
    batch, length, heads, *rest = t.shape
    n_chunks = -(-length // chunk)
    t = t.to(dtype)
    if n_chunks * chunk > length:
        t = F.pad(t, [0, 0] * len(rest) + [0, 0, 0, n_chunks * chunk - length])
    t = t.view(batch, n_chunks, chunk, heads, *rest).transpose(2, 3).transpose(0, 1)
    # reshape alone returns a strided view when B = 1, and then every matmul on it would make its
    # own contiguous copy: one copy here instead.
    return t.reshape(n_chunks, batch * heads, chunk, *rest).contiguous()


def _unchunk(t: torch.Tensor, batch: int, length: int, dtype: torch.dtype) -> torch.Tensor:
    """_chunks' inverse: (N, B * H, C, *rest) -> (B, T, H, *rest) in `dtype`, padding dropped."""
    n_chunks, _, chunk, *rest = t.shape
    t = t.view(n_chunks, batch, -1, chunk, *rest).permute(1, 0, 3, 2, *range(4, 4 + len(rest)))
    return t.reshape(batch, n_chunks * chunk, -1, *rest)[:, :length].to(dtype)
