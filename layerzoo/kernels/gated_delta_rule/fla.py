"""flash-linear-attention for the gated delta rule: an adapter to its Triton chunk kernel (CUDA
only), and its pure-PyTorch references (any device) for tests and benchmarks.

fla is imported here, on first use, so that importing layerzoo never compiles or probes Triton.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import torch

# fla's chunk kernel is written for these chunk sizes only.
FLA_CHUNK_SIZES = (16, 32, 64)


def fla_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    scale: float,
    initial_state: torch.Tensor | None,
    chunk_size: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """fla's `chunk_gated_delta_rule` with layerzoo's arguments, validated (chunk_size in FLA_CHUNK_SIZES).

    Same shapes as layerzoo's: fla also lays tensors out (B, T, H, D) and keeps the state
    (B, H, K, V) in fp32. Returns o (B, T, H, V) in q's dtype and the final state in fp32.
    """
    from fla.ops.gated_delta_rule import chunk_gated_delta_rule

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
    )
    return out, final_state


@functools.cache
def load_fla_naive() -> ModuleType | None:
    """fla's `ops/gated_delta_rule/naive.py` (naive_recurrent_ and naive_chunk_gated_delta_rule),
    loaded from its file alone, once; None when fla is not installed.

    Importing the fla package pulls in transformers and takes 15 s or more; naive.py needs only
    torch and einops.
    """
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "ops" / "gated_delta_rule" / "naive.py"
    module_spec = importlib.util.spec_from_file_location("fla_gated_delta_rule_naive", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
