"""The compiled ops as torch.compile and torch.export see them.

Both trace with fake tensors, which carry shapes, dtypes and strides but no data, so an op written
in C++ needs a Python fake saying what it returns: `forward_fake` and `backward_fake` follow
cpu_forward.cpp's `forward` and cpu_backward.cpp's `backward` allocation by allocation (the
argument checks stay in C++ and run when the traced graph does). The compiled forward also
updates its `state` argument in place and returns a list, which compile's functionalisation
cannot take apart; `gated_delta_rule_forward_functional` is the same op without side effects.
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def register_for_tracing() -> None:
    """Register both fakes and define torch.ops.layerzoo.gated_delta_rule_forward_functional, once
    per process, after the ops load: torch checks that an op exists before taking its fake, and
    defining an op imports torch's Triton support, which `import layerzoo` must not (Triton kernels
    load on first use)."""
    torch.library.register_fake("layerzoo::gated_delta_rule_forward")(forward_fake)
    torch.library.register_fake("layerzoo::gated_delta_rule_backward")(backward_fake)
    forward_functional = torch.library.custom_op(
        "layerzoo::gated_delta_rule_forward_functional", _forward_functional, mutates_args=())
    # On fake tensors the same body computes the fake: the clone, then the compiled forward's fake.
    forward_functional.register_fake(_forward_functional)


def forward_fake(q, k, v, g, beta, scale, state, chunk, keep):
    """[out (B, T, H, V)] and, when keep, the workspace: states (N + 1, B * H, K, V), v_new
    (N, B * H, C, V), w (N, B * H, C, K), inverse (N, B * H, C, C), with C = chunk and
    N = ceil(T / C). All new and contiguous, in v's dtype (one dtype for all inputs)."""
    batch, length, heads, key_dim = k.shape
    value_dim, rows = v.shape[-1], batch * heads
    n_chunks = (length + chunk - 1) // chunk
    outputs = [v.new_empty(batch, length, heads, value_dim)]
    if keep:
        outputs += [v.new_empty(n_chunks + 1, rows, key_dim, value_dim), v.new_empty(n_chunks, rows, chunk, value_dim),
                    v.new_empty(n_chunks, rows, chunk, key_dim), v.new_empty(n_chunks, rows, chunk, chunk)]
    return outputs


def backward_fake(q, k, v, g, beta, scale, states, v_new, w, inverse, d_out, d_final_state):
    """[dq, dk, dv, dg, dbeta, d_initial_state]: each laid out as q, k, v, g, beta and
    d_final_state (B * H, K, V), as the C++ allocates them (empty_like)."""
    return [torch.empty_like(t) for t in (q, k, v, g, beta, d_final_state)]


def _forward_functional(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                        scale: float, initial_state: torch.Tensor, chunk: int, keep: bool) -> list[torch.Tensor]:
    """gated_delta_rule_forward from a copy of initial_state (B * H, K, V): [out, final state,
    *workspace when keep]. The copy costs one state, small next to the output."""
    state = initial_state.clone()
    out, *space = torch.ops.layerzoo.gated_delta_rule_forward(q, k, v, g, beta, scale, state, chunk, keep)
    return [out, state, *space]

