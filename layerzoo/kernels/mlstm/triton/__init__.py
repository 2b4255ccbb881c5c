"""The mLSTM as chunkwise Triton kernels (TFLA / flash-linear-attention style), forward and backward.

Imported only when the "triton" backend runs (never by `import layerzoo`): Triton reads
TRITON_INTERPRET when a kernel is decorated, so importing early would freeze that choice.

Forward: chunk_states_kernel walks the chunks of each (batch, head) in order, tiled over
(Dk, Dv), and stores the state entering every chunk; chunk_outputs_kernel then computes every
chunk's outputs in parallel from its entering state plus the stabilised causal (L, L) part.
Backward: state_grads_kernel walks the chunks in reverse for the state gradients;
chunk_grads_kernel computes dq, dk, dv and the gate gradients of every chunk in parallel; the
max stabiliser's argmax path (a per-token scalar chain) is added in PyTorch (stabiliser.py).

Files: common.py (jit helpers: per-chunk gate algebra), forward.py, backward.py (kernels),
config.py (chunk length, tile widths, warps, dtypes), stabiliser.py, function.py (autograd).
"""

from .function import mlstm_triton

__all__ = ["mlstm_triton"]
