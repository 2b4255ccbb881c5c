"""Flash-attention-2 style Triton kernels for sliding-window attention (backend="triton").

Modules, one idea each:
    blocks.py       which key/query blocks each program visits (plain Python, no triton import)
    common.py       Triton helpers: masked tile loads/stores, the dot, the same block ranges
    forward.py      forward kernel: online softmax over the in-window key blocks, saves lse
    backward_kv.py  dK/dV kernel: per key block, over the query blocks (and GQA heads) seeing it
    backward_q.py   delta = rowsum(dO * O) and the dQ kernel, per query block
    configs.py      tile sizes / warps / stages, autotuned on GPU, fixed under the interpreter
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
