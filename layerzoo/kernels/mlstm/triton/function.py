"""The autograd Function around the Triton kernels, and the backend entry point mlstm_triton."""

from __future__ import annotations

import torch
import torch.nn.functional as F
import triton

from ...common.dtypes import compute_dtype
from ..reference import MLSTMState
from .backward import chunk_grads_kernel, state_grads_kernel
from .config import chunk_length, launch_config
from .forward import chunk_outputs_kernel, chunk_states_kernel
from .stabiliser import argmax_path, stabiliser_seeds

SUPPORTED = (torch.float32, torch.bfloat16, torch.float16, torch.float64)


def mlstm_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    initial_state: MLSTMState | tuple | None = None,
    chunk_size: int = 64,
    *,
    block_k: int | None = None,
    block_v: int | None = None,
) -> tuple[torch.Tensor, MLSTMState]:
    """The mLSTM over a sequence with the chunkwise Triton kernels, differentiable in every input.

    q, k: (B, T, H, Dk); v: (B, T, H, Dv), one dtype of fp32 / bf16 / fp16 / fp64; i, f: (B, T, H)
    any float dtype; initial_state None (empty) or (C (B, H, Dk, Dv), n (B, H, Dk), m (B, H)).
    T >= 1, any T and head dims (padded to powers of two >= 16 inside, masked).
    chunk_size: rounded up to a power of two in [16, 128] ([16, 64] before sm_90; down for short sequences), see
    config.chunk_length; results do not depend on it beyond rounding. block_k / block_v: replace
    every Dk / Dv tile width (powers of two >= 16; defaults in config.launch_config); tests shrink
    them to exercise the tiling at small shapes.

    Returns h (B, T, H, Dv) in q's dtype and the final MLSTMState in fp32 (fp64 for fp64 q).
    Runs on CUDA tensors, or on CPU under TRITON_INTERPRET=1. Inputs are not validated here;
    `mlstm(..., backend="triton")` validates.
    """
    if q.dtype not in SUPPORTED:
        raise ValueError(f"mlstm: the 'triton' backend takes fp32, bf16, fp16 or fp64 inputs, got {q.dtype}")
    capability = torch.cuda.get_device_capability(q.device)[0] if q.is_cuda else 9
    L = chunk_length(chunk_size, q.shape[1], capability)
    config = launch_config(q.dtype, q.shape[-1], v.shape[-1], L, block_k, block_v, capability)
    C0, n0, m0 = (None, None, None) if initial_state is None else tuple(initial_state)
    h, C, n, m = _MLSTMFunction.apply(q, k, v, i, f, C0, n0, m0, config)
    return h, MLSTMState(C, n, m)


class _MLSTMFunction(torch.autograd.Function):
    """(q, k, v, i, f, C0, n0, m0, config) -> (h, C, n, m); C0, n0, m0 may be None.

    Saved for the backward: the inputs, h, the gates as rows, the states entering every chunk
    (B*H, NC+1, ...) and per token qn, m, sigma (B*H, T), all from the forward kernels.
    """

    @staticmethod
    def forward(ctx, q, k, v, i, f, C0, n0, m0, config):
        batch, length, heads, key_dim = q.shape
        value_dim = v.shape[-1]
        dtype = compute_dtype(q.dtype)
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        # Gates as (B*H, T) rows in the compute dtype; logsigmoid in torch (stable, one pass).
        lf, ig = (_rows(g) for g in (F.logsigmoid(f.to(dtype)), i.to(dtype)))
        n_chunks = triton.cdiv(length, config["states"]["L"])
        rows = batch * heads
        has_initial = C0 is not None
        state_dtypes = (C0.dtype, n0.dtype, m0.dtype) if has_initial else None
        if has_initial:
            C0, n0, m0 = (t.to(dtype).contiguous() for t in (C0, n0, m0))
        m_start = m0 if has_initial else q.new_zeros(rows, dtype=dtype)
        C = q.new_empty(rows, n_chunks + 1, key_dim, value_dim, dtype=dtype)
        n = q.new_empty(rows, n_chunks + 1, key_dim, dtype=dtype)
        m = q.new_empty(rows, n_chunks + 1, dtype=dtype)
        states = config["states"]
        chunk_states_kernel[(_tiles(key_dim, states["BK"]), _tiles(value_dim, states["BV"]), rows)](
            k, v, lf, ig, C0 if has_initial else C, n0 if has_initial else n, m_start, C, n, m,
            length, heads, n_chunks, HAS_INITIAL=has_initial, **states,
        )
        h = q.new_empty(batch, length, heads, value_dim)
        qn, m_tok, sigma = (q.new_empty(rows, length, dtype=dtype) for _ in range(3))
        outputs = config["outputs"]
        chunk_outputs_kernel[(_tiles(value_dim, outputs["BV"]), n_chunks, rows)](
            q, k, v, lf, ig, C, n, m, h, qn, m_tok, sigma, length, heads, n_chunks, **outputs,
        )
        ctx.save_for_backward(q, k, v, f, h, lf, ig, C, n, m, qn, m_tok, sigma, C0, n0)
        ctx.config, ctx.dtypes = config, (i.dtype, f.dtype, state_dtypes)
        final = (C[:, -1].reshape(batch, heads, key_dim, value_dim), n[:, -1].reshape(batch, heads, key_dim),
                 m[:, -1].reshape(batch, heads))
        return (h, *(t.clone() for t in final))

    @staticmethod
    def backward(ctx, dh, dC_final, dn_final, dm_final):
        q, k, v, f, h, lf, ig, C, n, m, qn, m_tok, sigma, C0, n0 = ctx.saved_tensors
        batch, length, heads, key_dim = q.shape
        value_dim, rows, n_chunks = v.shape[-1], lf.shape[0], C.shape[1] - 1
        dtype = C.dtype
        dh = torch.zeros_like(h) if dh is None else dh.contiguous()
        delta = _rows((dh.to(dtype) * h.to(dtype)).sum(-1))
        has_final_grad = dC_final is not None or dn_final is not None
        # (B*H, Dk, Dv) and (B*H, Dk), like the stored states.
        dC_final = _final_grad(dC_final, C[:, -1])
        dn_final = _final_grad(dn_final, n[:, -1])

        dC = torch.empty_like(C)
        dn = torch.empty_like(n)
        state_grads = ctx.config["state_grads"]
        state_grads_kernel[(_tiles(key_dim, state_grads["BK"]), _tiles(value_dim, state_grads["BV"]), rows)](
            q, dh, lf, ig, m, qn, delta, dC_final, dn_final, dC, dn, length, heads, n_chunks,
            HAS_FINAL_GRAD=has_final_grad, **state_grads,
        )
        chunk_grads = ctx.config["chunk_grads"]
        key_tiles = _tiles(key_dim, chunk_grads["BK"])
        dq = q.new_empty(q.shape, dtype=dtype)
        dk = torch.empty_like(dq)
        dv = q.new_empty((key_tiles, *v.shape), dtype=dtype)
        dlf, di = (q.new_empty(key_tiles, rows, length, dtype=dtype) for _ in range(2))
        chunk_grads_kernel[(key_tiles, n_chunks, rows)](
            q, k, v, dh, lf, ig, C, n, m, qn, delta, dC, dn, dq, dk, dv, dlf, di,
            length, heads, n_chunks, batch, **chunk_grads,
        )
        dv, dlf, di = dv.sum(0), dlf.sum(0), di.sum(0)

        # The argmax path of m: h's EPS term per token, and the final m as returned (C and n
        # are stored relative to it, so reading them in another frame reaches m too).
        seeds = stabiliser_seeds(qn, m_tok, delta)
        final_seed = -(dC_final * C[:, -1]).sum((-2, -1)) - (dn_final * n[:, -1]).sum(-1)
        if dm_final is not None:
            final_seed = final_seed + dm_final.reshape(rows).to(dtype)
        seeds[:, -1] += final_seed
        G = argmax_path(seeds, sigma)
        dlf += sigma * G
        di += (1 - sigma) * G
        df = dlf * torch.sigmoid(-_rows(f.to(dtype)))  # d logsigmoid(f) / df

        i_dtype, f_dtype, state_dtypes = ctx.dtypes
        grads = [dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), _unrows(di, batch).to(i_dtype),
                 _unrows(df, batch).to(f_dtype)]
        if state_dtypes is None:
            grads += [None, None, None]
        else:
            dC0 = dC[:, 0].reshape(C0.shape)
            dn0 = dn[:, 0].reshape(n0.shape)
            # m0 scales C0 and n0 (true state C0 exp(m0)) and starts the chain of stabilisers.
            dm0 = (dC0 * C0).sum((-2, -1)) + (dn0 * n0).sum(-1) + (sigma[:, 0] * G[:, 0]).reshape(batch, heads)
            grads += [g.to(d) for g, d in zip((dC0, dn0, dm0), state_dtypes)]
        return (*grads, None)


def _tiles(dim: int, width: int) -> int:
    """How many tiles of `width` cover a head dim: one grid axis."""
    return triton.cdiv(dim, width)


def _final_grad(grad: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor:
    """The gradient of a final-state output, contiguous and shaped like `like` (zeros for None)."""
    return like.new_zeros(like.shape) if grad is None else grad.to(like.dtype).reshape(like.shape).contiguous()


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(B, T, H) -> contiguous (B*H, T)."""
    return t.transpose(1, 2).reshape(-1, t.shape[1]).contiguous()


def _unrows(t: torch.Tensor, batch: int) -> torch.Tensor:
    """(B*H, T) -> (B, T, H)."""
    return t.reshape(batch, -1, t.shape[-1]).transpose(1, 2)
