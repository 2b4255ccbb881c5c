"""Chunk-major layouts: a (B, T, H, ...) tensor as (N, B * H, C, ...) chunks of C steps, and back.

The chunkwise kernels work chunk-major so that their loops over chunks read contiguous slices and
every batched matmul folds its batch dimensions without copying.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def to_chunks(t: torch.Tensor, chunk: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, T, H, *rest) -> contiguous (N, B * H, C, *rest) in `dtype`, zero-padded to N * C steps.

    Zero padding is inert in every linear recurrence here: a padded step has k = 0 (and beta =
    0), so it writes nothing to the state, and g = 0, so it decays nothing.
    """
    batch, length, heads, *rest = t.shape
    n_chunks = -(-length // chunk)
    if n_chunks * chunk > length:
        t = F.pad(t, [0, 0] * len(rest) + [0, 0, 0, n_chunks * chunk - length])
    t = t.view(batch, n_chunks, chunk, heads, *rest).permute(1, 0, 3, 2, *range(4, 4 + len(rest)))
    # one copy, with the dtype cast, into the chunk-major layout
    return t.new_empty(t.shape, dtype=dtype).copy_(t).view(n_chunks, batch * heads, chunk, *rest)


def unchunk_into(dst: torch.Tensor, t: torch.Tensor) -> None:
    """Writes to_chunks' layout t (N, B * H, C, *rest) into dst (B, T, H, *rest), T <= N * C steps."""
    batch, length, heads, *rest = dst.shape
    n_chunks, _, chunk = t.shape[:3]
    steps = t.view(n_chunks, batch, heads, chunk, *rest).permute(1, 0, 3, 2, *range(4, 4 + len(rest)))
    full = length // chunk  # whole chunks: one strided copy; a last partial chunk: another
    dst[:, :full * chunk].view(batch, full, chunk, heads, *rest).copy_(steps[:, :full])
    if full * chunk < length:
        dst[:, full * chunk:].copy_(steps[:, full, :length - full * chunk])


def from_chunks(t: torch.Tensor, batch: int, heads: int, length: int) -> torch.Tensor:
    """to_chunks' layout t (N, B * H, C, *rest) as a new (B, T, H, *rest) tensor of the first
    T <= N * C steps: unchunk_into for autograd, which records no writes into a buffer."""
    n_chunks, _, chunk, *rest = t.shape
    steps = t.view(n_chunks, batch, heads, chunk, *rest).permute(1, 0, 3, 2, *range(4, 4 + len(rest)))
    return steps.reshape(batch, n_chunks * chunk, heads, *rest)[:, :length]
