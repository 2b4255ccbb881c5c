"""The "fla" backend: an adapter to flash-linear-attention's Triton chunk kernel (CUDA only).

fla is imported on first use, so that importing layerzoo never compiles or probes Triton.
"""

from __future__ import annotations

import torch

from ..common.matrix_state import fla_packed

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
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

    def call(state, packed):
        return chunk_gated_delta_rule(
            q.contiguous(),
            k.contiguous(),
            v.contiguous(),
            # fla accumulates the log decay in fp32; handing it fp32 avoids a bf16 cumulative sum.
            g.float().contiguous(),
            beta.contiguous(),
            scale=scale,
            initial_state=None if state is None else state.float().contiguous(),
            output_final_state=True,
            chunk_size=chunk_size,
            **packed,
        )

    return fla_packed(call, initial_state, bounds, (k.shape[2], k.shape[3], v.shape[3]), q)
