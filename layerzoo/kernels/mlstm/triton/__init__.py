"""The mLSTM as chunkwise Triton kernels (TFLA / flash-linear-attention style), forward and backward.

This package's face is the "triton" backend's adapter, which imports the kernels (and triton) on
its first call, never at `import layerzoo`: Triton reads TRITON_INTERPRET when a kernel is
decorated, so importing early would freeze that choice.

Forward: chunk_states_kernel walks the chunks of each (batch, head) in order, tiled over
(Dk, Dv), and stores the state entering every chunk; chunk_outputs_kernel then computes every
chunk's outputs in parallel from its entering state plus the stabilised causal (L, L) part.
Backward: state_grads_kernel walks the chunks in reverse for the state gradients;
chunk_grads_kernel computes dq, dk, dv and the gate gradients of every chunk in parallel; the
max stabiliser's argmax path (a per-token scalar chain) is added in PyTorch (stabiliser.py).

Files: common.py (jit helpers: per-chunk gate algebra), forward.py, backward.py (kernels),
config.py (chunk length, tile widths, warps, dtypes), stabiliser.py, function.py (autograd).
"""


from __future__ import annotations

from ...common.backends import require_triton

__all__ = ["mlstm_triton"]


def mlstm_triton(q, k, v, i, f, initial_state=None, chunk_size=64, **blocks):
    """The "triton" backend: the chunkwise Triton kernels, imported on first call.

    Same contract as the other backends: q, k (B, T, H, Dk), v (B, T, H, Dv), i, f (B, T, H),
    B, T >= 1 -> (h (B, T, H, Dv), final MLSTMState), differentiable in every input. CUDA
    tensors, or CPU under TRITON_INTERPRET=1 (else a one-line ValueError). fp32, bf16, fp16 and
    fp64 inputs (fp64 computes in fp64). chunk_size is rounded up to a power of two in [16, 128]
    ([16, 64] before sm_90), since the kernels' tiles need one; the result does not depend on it
    beyond rounding.

    Args:
        q: (B, T, H, Dk) queries, CUDA (or CPU under TRITON_INTERPRET=1); B, T >= 1.
        k: (B, T, H, Dk) keys.
        v: (B, T, H, Dv) values.
        i: (B, T, H) input gate pre-activations.
        f: (B, T, H) forget gate pre-activations.
        initial_state: None (empty) or an MLSTMState / (C, n, m) tuple of B rows.
        chunk_size: tokens per chunk, rounded up to a power of two in [16, 128] ([16, 64] before
            sm_90).
        **blocks: block_k / block_v, the kernels' tile widths (see function.mlstm_triton).

    Returns:
        The pair (h, final MLSTMState): h (B, T, H, Dv) in q's dtype, the state in fp32 (fp64
            for fp64 inputs).

    Raises:
        ValueError: Triton is not installed, or q is not on CUDA (and TRITON_INTERPRET is unset).
    """
    require_triton(q, "mlstm")
    from .function import mlstm_triton as kernel  # imports triton: only now, see the module doc

    return kernel(q, k, v, i, f, initial_state, chunk_size, **blocks)
