"""The "fla" backend: an adapter to flash-linear-attention's Triton chunk kernel (CUDA only).

fla is imported on first use, so that importing layerzoo never compiles or probes Triton.
"""

from __future__ import annotations

import torch

from ..common import without_empty_sequences

# fla's chunk kernel is written for these chunk sizes only.
FLA_CHUNK_SIZES = (16, 32, 64)


def gated_delta_rule_fla(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
    *,
    bounds: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """fla's `chunk_gated_delta_rule` with layerzoo's arguments, validated (chunk_size in FLA_CHUNK_SIZES).

    Same shapes as layerzoo's: fla also lays tensors out (B, T, H, D) and keeps the state
    (B, H, K, V) in fp32. bounds: the offsets of packed sequences (B = 1), which fla takes as its
    own cu_seqlens; the states then have a row per sequence. Returns o (B, T, H, V) in q's dtype
    and the final state in fp32.
    """
    if bounds is not None and any(end == start for start, end in zip(bounds, bounds[1:])):
        # fla's kernels are not written for sequences without a chunk
        shape = (len(bounds) - 1, k.shape[2], k.shape[3], v.shape[3])
        state = q.new_zeros(shape, dtype=torch.float32) if initial_state is None else initial_state.float()

        def run(offsets, rows):
            return gated_delta_rule_fla(q, k, v, g, beta, scale, rows, chunk_size, bounds=offsets)

        return without_empty_sequences(run, bounds, state)
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    packed = {}
    if bounds is not None:
        # the host copy spares fla a device sync to find its chunks
        offsets = torch.tensor(bounds, dtype=torch.int64)
        packed = {"cu_seqlens": offsets.to(q.device), "cu_seqlens_cpu": offsets}
    out, final_state = chunk_gated_delta_rule(
        q.contiguous(),
        k.contiguous(),
        v.contiguous(),
        # fla accumulates the log decay in fp32; handing it fp32 avoids a bf16 cumulative sum.
        g.float().contiguous(),
        beta.contiguous(),
        scale=scale,
        initial_state=None if initial_state is None else initial_state.float().contiguous(),
        output_final_state=True,
        chunk_size=chunk_size,
        **packed,
    )
    return out, final_state

