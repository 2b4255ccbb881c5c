"""SSD chunk by chunk, in PyTorch under autograd.

Per chunk of C tokens and head, with gc the in-chunk cumulative log decay and L[i, j] =
exp(gc_i - gc_j) for j <= i (common/chunks.py: decays):

    o = scale ((q exp(gc)) S + (q k^T * L) v)           S: the state entering the chunk
    S <- exp(gc_last) S + (k exp(gc_last - gc))^T v

Everything but the state is one batched computation over all chunks (the chunk's own output and
its contribution k^T v to the state); a loop over the chunks then carries the (K, V) state with
one multiply-add each and adds what the state entering each chunk gives its outputs, while that
chunk's tensors are still in cache. Autograd differentiates it. The "native" backend (native.py)
runs the same algorithm compiled, a head per thread, each chunk in cache.
"""

from __future__ import annotations

import torch

from ..common.chunks import decays, from_chunks, to_chunks
from ..common.dtypes import compute_dtype


def ssd_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """SSD with chunks of `chunk_size` tokens (fewer when T is shorter).

    All arithmetic runs in the state's dtype, fp32 (fp64 for fp64 inputs). Differentiable in
    every input. Inputs are not validated here; `ssd(...)` validates.

    Args:
        q: (B, T, H, K) queries, any float dtype; T >= 1.
        k: (B, T, H, K) keys.
        v: (B, T, H, V) values.
        g: (B, T, H) log decay (<= 0).
        scale: the factor on q (the public function's default is K ** -0.5).
        initial_state: (B, H, K, V), or None for zeros.
        chunk_size: tokens per chunk, an int >= 1.

    Returns:
        The pair (o, final_state): o (B, T, H, V) in q's dtype, the state (B, H, K, V) in fp32
            (fp64 for fp64 inputs).
    """
    chunk = min(chunk_size, q.shape[1])
    batch, length, heads, key_dim = k.shape
    value_dim, out_dtype, dtype = v.shape[-1], q.dtype, compute_dtype(q.dtype)
    q, k, v, g = (to_chunks(t, chunk, dtype) for t in (q, k, v, g))
    from_start, to_end, inside = decays(g)
    q = q * scale
    out = torch.matmul(torch.matmul(q, k.mT).mul_(inside), v)  # within each chunk
    written = torch.matmul((k * to_end[..., None]).mT, v)  # each chunk's k^T v, decayed to its end
    q_from_start = q * from_start[..., None]
    chunk_decay = from_start[..., -1, None, None]

    state = q.new_zeros(batch * heads, key_dim, value_dim) if initial_state is None \
        else initial_state.to(dtype).reshape(batch * heads, key_dim, value_dim)
    outputs = []
    for out_i, q_i, written_i, decay_i in zip(out.unbind(), q_from_start.unbind(), written.unbind(), chunk_decay.unbind()):
        outputs.append(torch.baddbmm(out_i, q_i, state))  # plus what the state entering the chunk gives
        state = torch.addcmul(written_i, state, decay_i)
    out = torch.stack(outputs)
    return from_chunks(out, batch, heads, length).to(out_dtype), state.view(batch, heads, key_dim, value_dim)
