"""The "native" backend: SSD's compiled CPU forward (cpu_forward.cpp), built on first use (see
common/matrix_state.py), with chunkwise.py's PyTorch code wherever it does not run."""

from __future__ import annotations

import torch

from ..common.matrix_state import compiled_forward, run_compiled_forward
from .chunkwise import ssd_chunkwise

COMPILED = compiled_forward("ssd", "SSD forward")


def ssd_native(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, scale: float,
               initial_state: torch.Tensor | None, chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """SSD by the compiled forward, as ssd_chunkwise takes and returns it; ssd_chunkwise itself
    where a gradient is wanted (the compiled kernel has no backward), off the CPU or where it is
    turned off (LAYERZOO_NATIVE=0) or cannot be built."""
    chunk = min(chunk_size, q.shape[1])
    compiled = run_compiled_forward(COMPILED, "ssd", (q, k, v, g), initial_state, scale, chunk)
    return ssd_chunkwise(q, k, v, g, scale, initial_state, chunk_size) if compiled is None else compiled
