"""The "fla" backend: an adapter to flash-linear-attention's Triton `chunk_simple_gla` (CUDA only).

fla is imported on first use, so that importing layerzoo never compiles or probes Triton.
"""

from __future__ import annotations

import torch

from ..common.matrix_state import fla_packed


def ssd_fla(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    *,
    bounds: list[int] | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """fla's `chunk_simple_gla` with layerzoo's arguments, validated.

    Same shapes and semantics: fla lays tensors out (B, T, H, D), keeps the state (B, H, K, V) in
    fp32 and decays it by exp(g) per head and step; its chunk size is its own (64), which changes
    nothing but rounding. bounds: the offsets of packed sequences (B = 1), which fla takes as its
    own cu_seqlens; the states then have a row per sequence. Returns o (B, T, H, V) in q's dtype
    and the final state in fp32.
    """
    from fla.ops.simple_gla import chunk_simple_gla

    def call(state, packed):
        out, final = chunk_simple_gla(
            q.contiguous(),
            k.contiguous(),
            v.contiguous(),
            # fla accumulates the log decay in fp32; handing it fp32 avoids a bf16 cumulative sum.
            g=g.float().contiguous(),
            scale=scale,
            initial_state=None if state is None else state.float().contiguous(),
            output_final_state=True,
            **packed,
        )
        return out, final.float()

    return fla_packed(call, initial_state, bounds, (k.shape[2], k.shape[3], v.shape[3]), q)
