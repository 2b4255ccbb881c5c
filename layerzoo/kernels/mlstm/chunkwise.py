"""Chunkwise-parallel mLSTM in plain PyTorch: O(T (L (Dk + Dv) + Dk Dv)) work for chunks of L tokens.

The sequence is cut into chunks of L tokens. Inside a chunk, with b_t = cumsum(log_f) from the
chunk start, token j reaches token t with log-weight b_t - b_j + i_j and the state entering the
chunk with log-weight b_t + m_in. So each chunk is

    h_t ~ exp(b_t + m_in - m_t) q_t C_in + sum_{j<=t} exp(b_t - b_j + i_j - m_t) (q_t . k_j) v_j

a masked (L, L) matrix product, row-stabilised by m_t = the largest of those log-weights (exactly
the recurrent m_t, so results agree to rounding, even in the EPS term). Across chunks only the
states are carried: each chunk's own contribution (b_L - b_j + i_j weights) is one batched
matmul, and a short loop over chunks folds them in with their own max stabiliser.

n follows C's recurrence with v = 1, so it rides along as an extra value column: one matmul gives
both q C and q . n.

Packed sequences (cu_seqlens) go on a ChunkGrid, each sequence from a chunk boundary: the in-chunk
part runs once over every chunk of every sequence, and the loop over chunks restarts from a
sequence's own initial state at its first chunk, which is where a forget gate of exactly 0 would
act (cumulative sums of log gates cannot carry that -inf, this loop needs none).

The "native" backend (native.py, cpu_forward.cpp) runs the same chunks compiled, a head per
thread, where autograd records nothing.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..common.chunks import ChunkGrid
from ..common.dtypes import compute_dtype
from .reference import EPS, MLSTMState


def mlstm_chunkwise(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    initial_state: MLSTMState | None = None,
    chunk_size: int = 64,
    *,
    bounds: list[int] | None = None,
) -> tuple[torch.Tensor, MLSTMState]:
    """The mLSTM over a whole sequence, chunk by chunk.

    Any T >= 1: the last chunk is padded with tokens that neither write nor forget, so padding
    never reaches the state. All arithmetic and states in fp32 (fp64 for fp64 q). Inputs are not
    validated here; `mlstm(...)` validates.

    Args:
        q: (B, T, H, Dk) queries, any float dtype; T >= 1.
        k: (B, T, H, Dk) keys.
        v: (B, T, H, Dv) values.
        i: (B, T, H) input gate pre-activations.
        f: (B, T, H) forget gate pre-activations.
        initial_state: None (empty) or an MLSTMState / (C, n, m) tuple of B rows.
        chunk_size: tokens per chunk.
        bounds: None, or the offsets of packed sequences (cu_seqlens as ints; B = 1): then
            initial_state and the final state hold one row per sequence, and nothing crosses a
            boundary.

    Returns:
        The pair (h, final MLSTMState): h (B, T, H, Dv) in q's dtype, the state in fp32 (fp64 for
            fp64 q).
    """
    length, key_dim, value_dim = q.shape[1], q.shape[3], v.shape[3]
    out_dtype, dtype = q.dtype, compute_dtype(q.dtype)
    if bounds is None:
        grid = None
        chunk = min(chunk_size, length)
        n_chunks = -(-length // chunk)
        pad = n_chunks * chunk - length
        first_chunks = [0, n_chunks]
    else:
        longest = max(end - start for start, end in zip(bounds, bounds[1:]))
        grid = ChunkGrid.build(bounds, min(chunk_size, longest), q.device)
        chunk, n_chunks, pad, first_chunks = grid.chunk, grid.n_chunks, 0, grid.first_chunks

    def to_chunks(t: torch.Tensor, fill: float = 0.0, extra_columns: int = 0) -> torch.Tensor:
        """(B, T, H[, D]) -> (B, H, N, L[, D + extra_columns]) in the compute dtype, padded with fill."""
        t = t.to(dtype)
        if grid is not None:
            t = grid.spread(t, fill)
        t = t.movedim(1, 2)
        widths = (0, extra_columns, 0, pad) if t.dim() == 4 else (0, pad)
        if any(widths):
            t = F.pad(t, widths, value=fill)
        # Contiguous (one copy either way; F.pad's result already is): the batched matmuls would
        # otherwise copy every strided operand again.
        return t.contiguous().unflatten(2, (n_chunks, chunk))

    q, k = to_chunks(q), to_chunks(k)
    # The ones column; padded tokens write nothing, so their v may be ones too.
    v = to_chunks(v, fill=1.0, extra_columns=1)
    # Padding: forget gate 1 (log 0) and input gate 0 (log -inf) leave the state untouched.
    b = to_chunks(F.logsigmoid(f.to(dtype))).cumsum(-1)
    i = to_chunks(i, fill=float("-inf"))
    # q's Dk^-0.5 goes into the per-row factors below (a log offset for the intra-chunk weights)
    # rather than a pass over q.
    log_scale = -0.5 * math.log(key_dim)

    # Token j's write in log space, measured from the chunk start: it reaches token t (or the
    # chunk end, t = L) with log-weight b_t + written_j.
    written = i - b
    states, m_in, final = _chunk_states(k, v, written, b[..., -1], initial_state, first_chunks, grid is not None)

    # The row max of b_t + written_j over j <= t is a running max, so no (L, L) pass finds m.
    m = b + torch.maximum(m_in[..., None], written.cummax(-1).values)
    causal = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    row = b - m + log_scale
    # In-place where autograd allows it: each (L, L) buffer saved is a pass over T * L floats.
    weights = (row[..., :, None] + written[..., None, :]).masked_fill_(~causal, float("-inf")).exp_()
    scores = (q @ k.transpose(-1, -2)) * weights
    from_state = (q * torch.exp(row + m_in[..., None])[..., None]) @ states
    out = (scores @ v).add_(from_state)
    numerator, q_dot_n = out[..., :value_dim], out[..., value_dim]
    h = numerator / (torch.maximum(q_dot_n.abs(), torch.exp(-m)) + EPS)[..., None]
    h = h.flatten(2, 3).movedim(1, 2)
    h = h[:, :length] if grid is None else grid.gather(h)
    return h.to(out_dtype), final


def _chunk_states(
    k: torch.Tensor, v: torch.Tensor, written: torch.Tensor, decay: torch.Tensor, initial_state: MLSTMState | None,
    first_chunks: list[int], packed: bool,
) -> tuple[torch.Tensor, torch.Tensor, MLSTMState]:
    """The state entering every chunk, and the final state.

    k: (B, H, N, L, Dk); v: (B, H, N, L, Dv + 1) with the ones column; written: (B, H, N, L), the
    log write weights i_j - b_j; decay: (B, H, N), each chunk's summed log forget gate b_L.
    first_chunks: where each sequence's chunks start, ChunkGrid's; unpacked, [0, N] (every row one
    sequence). packed: B = 1 and the states have a row per sequence.
    Returns [C | n] entering each chunk (B, H, N, Dk, Dv + 1), its m (B, H, N), and the state
    after each sequence's last chunk (its initial state when it has none).
    """
    batch, heads, _, _, key_dim = k.shape
    value_dim = v.shape[-1] - 1
    if initial_state is None:
        rows = len(first_chunks) - 1 if packed else batch
        initial_state = MLSTMState.empty(rows, heads, key_dim, value_dim, k.dtype, k.device)
    C, n, m = (t.to(k.dtype) for t in initial_state)
    state = torch.cat((C, n[..., None]), dim=-1)

    # Each chunk's own writes to its end, stabilised by their largest log-weight own_m. A chunk
    # that writes nothing (every i = -inf: padding) has top = -inf; shifting by 0 instead keeps its
    # zero contribution from becoming exp(-inf + inf) = NaN.
    top = written.amax(-1)
    shift = torch.where(top.isneginf(), 0.0, top)
    own = (k * torch.exp(written - shift[..., None])[..., None]).transpose(-1, -2) @ v
    own_m = decay + top

    # Packed sequences are independent: their chunks are laid out as rows (sequence, chunk of it),
    # so the serial scan below takes as many steps as the longest sequence has chunks, not as the
    # whole row has.
    layout = _SequenceRows(first_chunks, k.device) if packed else None
    if layout is not None:
        decay, own, own_m = layout.spread(decay, 0.0), layout.spread(own, 0.0), layout.spread(own_m, float("-inf"))

    entering, entering_m = [], []
    # unbind, not indexing per chunk: each index op's backward would write a zero tensor the size
    # of all chunks, O(N^2) memory traffic in all.
    for decay_c, own_c, own_m_c in zip(decay.unbind(-1), own.unbind(2), own_m.unbind(-1)):
        entering.append(state)
        entering_m.append(m)
        m_new = torch.maximum(decay_c + m, own_m_c)
        keep = torch.exp(decay_c + m - m_new)[..., None, None]
        write = torch.exp(own_m_c - m_new)[..., None, None]
        state = keep * state + write * own_c
        m = m_new
    final = MLSTMState(state[..., :value_dim], state[..., value_dim], m)
    entering = torch.stack(entering, dim=2) if entering else state.new_zeros(*state.shape[:2], 0, *state.shape[2:])
    entering_m = torch.stack(entering_m, dim=-1) if entering_m else m.new_zeros(*m.shape, 0)
    if layout is not None:
        entering, entering_m = layout.gather(entering), layout.gather(entering_m)
    return entering, entering_m, final


class _SequenceRows:
    """The chunks of packed sequences (dim 2 of (1, H, N, ...)) as rows (S, H, W, ...), W the most
    chunks of any sequence, the rest of a row filled with chunks that change nothing."""

    def __init__(self, first_chunks: list[int], device: torch.device):
        counts = [end - start for start, end in zip(first_chunks, first_chunks[1:])]
        total, self.width = first_chunks[-1], max(counts, default=0)
        slots = torch.full((len(counts), self.width), total, dtype=torch.long)  # total: the filler chunk
        for row, (start, count) in enumerate(zip(first_chunks, counts)):
            slots[row, :count] = torch.arange(start, start + count)
        self.slots = slots.to(device)
        self.places = (slots.flatten() < total).nonzero().squeeze(1).to(device)  # chunk order: rows are in order

    def spread(self, t: torch.Tensor, fill: float) -> torch.Tensor:
        """(1, H, N, ...) -> (S, H, W, ...)."""
        t = torch.cat((t[0], t.new_full((t.shape[1], 1, *t.shape[3:]), fill)), dim=1)
        return t[:, self.slots].movedim(1, 0)

    def gather(self, t: torch.Tensor) -> torch.Tensor:
        """(S, H, W, ...) -> (1, H, N, ...), the filler chunks dropped."""
        return t.movedim(0, 1).flatten(1, 2).index_select(1, self.places)[None]
