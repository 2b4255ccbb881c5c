"""Working chunk by chunk: chunk-major layouts, packed sequences on a grid of chunks, and the
pieces the chunkwise linear recurrences compute per chunk.

Chunk-major: a (B, T, H, ...) tensor as (N, B * H, C, ...) chunks of C steps, so that the loops
over chunks read contiguous slices and every batched matmul folds its batch dimensions without
copying.

Packed sequences (cu_seqlens) on a ChunkGrid, every sequence starting a chunk of its own: a
chunked kernel must never let one chunk hold the end of a sequence and the start of the next,
since its in-chunk work (masked (L, L) products, cumulative gates) would mix them. On the grid
each chunk lies inside one sequence, so the in-chunk work stays one batched computation over every
chunk of every sequence, and only what crosses chunks (a recurrence's carried state, attention's
earlier keys) needs to know where sequences start. The cost is the padding of each sequence's
last chunk: fewer than `chunk` slots per sequence.

The per-chunk pieces (decays, unit_lower_inverse) take chunk-major tensors and work under
autograd too (SSD's and KDA's chunkwise kernels differentiate through them).
"""

from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class ChunkGrid:
    """Where the tokens of packed sequences sit on a grid of chunks of `chunk` slots.

    source: (n_chunks * chunk,) int64, the packed index of the token in each slot; T (one past the
        last token) for padding slots. slots: (T,) int64, the slot of each packed token.
    first_chunks: N + 1 offsets; sequence s owns chunks [first_chunks[s], first_chunks[s + 1]),
        none when it is empty.
    """

    chunk: int
    source: torch.Tensor
    slots: torch.Tensor
    first_chunks: list[int]

    @classmethod
    def build(cls, bounds: list[int], chunk: int, device: torch.device) -> ChunkGrid:
        """The grid for sequences at offsets `bounds` (cu_seqlens as ints) in chunks of `chunk`."""
        starts = torch.tensor(bounds[:-1])
        lengths = torch.tensor(bounds[1:]) - starts
        counts = (lengths + chunk - 1) // chunk
        first_chunks = [0, *counts.cumsum(0).tolist()]
        sequence = torch.repeat_interleave(torch.arange(len(lengths)), lengths)
        total = bounds[-1]
        slots = torch.tensor(first_chunks[:-1])[sequence] * chunk + torch.arange(total) - starts[sequence]
        source = torch.full((first_chunks[-1] * chunk,), total, dtype=torch.int64)
        source[slots] = torch.arange(total)
        return cls(chunk, source.to(device), slots.to(device), first_chunks)

    @property
    def n_chunks(self) -> int:
        return self.first_chunks[-1]

    def spread(self, t: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        """t (1, T, ...) laid out on the grid: (1, n_chunks * chunk, ...), padding slots `fill`."""
        padded = torch.cat((t, t.new_full((1, 1, *t.shape[2:]), fill)), dim=1)
        return padded.index_select(1, self.source)

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """The tokens of a grid tensor (1, n_chunks * chunk, ...) back in packed order: (1, T, ...)."""
        return t.index_select(1, self.slots)


def decays(g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From log decays g (N, BH, C): exp(gc), exp(gc_last - gc) (N, BH, C) and L (N, BH, C, C).

    gc is the in-chunk cumulative sum of g; L[i, j] = exp(gc_i - gc_j) for j <= i, 0 above the
    diagonal. gc is summed in fp64 so that gc_i - gc_j keeps the digits of a short span even
    after a strongly negative gate made gc large (in fp32 that difference would lose them); the
    spans are rounded to g's dtype before exp. Every factor is <= 1, so nothing overflows.
    """
    cumulative = g.double().cumsum(-1)
    from_start = cumulative.exp().to(g.dtype)
    to_end = (cumulative[..., -1:] - cumulative).exp().to(g.dtype)
    # the upper triangle would be exp of a positive span, which may overflow: it is exp(-inf) = 0
    # instead, whose gradient is 0 too (an inf zeroed after exp would give NaN gradients)
    span = (cumulative[..., :, None] - cumulative[..., None, :]).to(g.dtype)
    inside = span.masked_fill_(above_diagonal(g.shape[-1], g.device), float("-inf")).exp_()
    return from_start, to_end, inside


def above_diagonal(n: int, device: torch.device) -> torch.Tensor:
    """(n, n) bool, True where j > i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu_(1)


def unit_lower_inverse(a: torch.Tensor, block: int = 16) -> torch.Tensor:
    """(I + strict_tril(a))^-1 for a (..., n, n); a's diagonal and upper triangle are not read.

    Halves recursively, [[X, 0], [Y, Z]]^-1 = [[X^-1, 0], [-Z^-1 Y X^-1, Z^-1]], down to blocks
    of `block` solved against the identity: the batched solver is slow per matrix on CPU, and
    this does most of the work in batched matmuls, which are not.
    """
    n = a.shape[-1]
    if n <= block:
        eye = torch.eye(n, dtype=a.dtype, device=a.device).expand_as(a)
        return torch.linalg.solve_triangular(a, eye, upper=False, unitriangular=True)
    half = n // 2
    top = unit_lower_inverse(a[..., :half, :half], block)
    bottom = unit_lower_inverse(a[..., half:, half:], block)
    inverse = a.new_zeros(a.shape)
    inverse[..., :half, :half] = top
    inverse[..., half:, half:] = bottom
    inverse[..., half:, :half] = bottom @ a[..., half:, :half] @ top
    inverse[..., half:, :half].neg_()
    return inverse
