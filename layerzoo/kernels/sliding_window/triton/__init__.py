"""Flash-attention-2 style Triton kernels for sliding-window attention (backend="triton").

Modules, one idea each:
    common.py       Triton helpers: masked tile loads/stores, the dot, which key/query blocks each
                    program visits
    forward.py      forward kernel: online softmax over the in-window key blocks, saves lse
    backward.py     delta = rowsum(dO * O); the dK/dV kernel, per key block over the query blocks
                    (and GQA heads) seeing it; the dQ kernel, per query block
    config.py       tile sizes / warps / stages, autotuned on GPU, fixed under the interpreter
    function.py     launchers and the torch.autograd.Function

This package's face is the "triton" backend's adapter, which imports the kernels (and triton) on
its first call: Triton reads TRITON_INTERPRET when a kernel is decorated.
"""

from __future__ import annotations

import torch

__all__ = ["sliding_window_attention_triton"]


def sliding_window_attention_triton(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, window: int | None,
                                    scale: float | None = None, *, blocks: dict | None = None) -> torch.Tensor:
    """The "triton" backend: flash-attention-2 style kernels that visit only in-window key blocks
    (function.sliding_window_attention_triton, whose arguments these are).

    q: (B, Tq, H, D); k, v: (B, Tk, Hkv, D), H % Hkv == 0, Tk >= Tq >= 1; window None or >= 1.
    Returns (B, Tq, H, D) in q's dtype, differentiable in q, k and v.
    """
    from .function import sliding_window_attention_triton as kernel  # imports triton: only now

    return kernel(q, k, v, window, scale, blocks=blocks)
