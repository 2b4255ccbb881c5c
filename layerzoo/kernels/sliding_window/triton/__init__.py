"""Flash-attention-2 style Triton kernels for sliding-window attention (backend="triton").

Modules, one idea each:
    common.py       Triton helpers: masked tile loads/stores, the dot, which key/query blocks each
                    program visits
    forward.py      forward kernel: online softmax over the in-window key blocks, saves lse
    backward.py     delta = rowsum(dO * O); the dK/dV kernel, per key block over the query blocks
                    (and GQA heads) seeing it; the dQ kernel, per query block
    config.py       tile sizes / warps / stages, autotuned on GPU, fixed under the interpreter
    function.py     launchers and the torch.autograd.Function

Triton reads TRITON_INTERPRET when a kernel is decorated, so nothing here imports triton until
`sliding_window_attention_triton` is first looked up (PEP 562 module __getattr__).
"""

from __future__ import annotations

__all__ = ["sliding_window_attention_triton"]


def __getattr__(name: str):
    if name == "sliding_window_attention_triton":
        from .function import sliding_window_attention_triton

        return sliding_window_attention_triton
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
