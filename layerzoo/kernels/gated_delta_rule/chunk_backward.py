"""The chunkwise gated delta rule's backward, written out (see chunk_forward.py for the forward).

The state gradient runs backwards over the chunks, mirroring the forward's loop:

    dv_new = scale (q k^T * L)^T do + (k exp(gc_last - gc)) dS'
    dS = exp(gc_last) dS' + scale (q exp(gc))^T do - w^T dv_new

and everything else is batched over all chunks. Through M = (I + A)^-1:
dA = -strict_tril(M^T dw w^T + M^T du u^T). Gradients of the decays are summed over exactly the
steps each decay spans (never as differences of cumulative sums), so a gate between two
strongly decayed steps gets a gradient with all its digits.
"""

from __future__ import annotations

import torch

from ..common.chunks import decays


def chunk_backward(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor, scale: float,
    states: torch.Tensor, v_new: torch.Tensor, w: torch.Tensor, inverse: torch.Tensor,
    d_out: torch.Tensor, d_final_state: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """Gradients (dq, dk, dv, dg, dbeta, d_initial_state) in chunk_forward's layouts.

    The inputs are chunk_forward's inputs and saved outputs, d_out (N, BH, C, V) and
    d_final_state (BH, K, V).
    """
    n_chunks = k.shape[0]
    from_start, to_end, inside = decays(g)
    k_beta = k * beta[..., None]
    k_to_end = k * to_end[..., None]
    q_k = torch.matmul(q, k.mT)

    d_v_new = torch.matmul(q_k.mul(inside).mT, d_out).mul_(scale)
    q_from_start = q * (scale * from_start)[..., None]
    d_states = torch.empty_like(states)
    d_states[n_chunks] = d_final_state
    # dS' starts as the output's direct contribution to the state gradient
    torch.matmul(q_from_start.mT, d_out, out=d_states[:n_chunks])
    chunk_decay = from_start[..., -1, None, None]
    d_state = d_states.unbind()
    steps = zip(d_v_new.unbind(), k_to_end.unbind(), chunk_decay.unbind(), w.mT.unbind())
    for i, (d_v_new_i, k_i, decay_i, w_i) in reversed(list(enumerate(steps))):
        d_v_new_i.baddbmm_(k_i, d_state[i + 1])
        d_state[i].addcmul_(d_state[i + 1], decay_i).baddbmm_(w_i, d_v_new_i, alpha=-1)

    entering, d_leaving = states[:-1], d_states[1:]
    d_q_from_start = torch.matmul(d_out, entering.mT)
    d_scores = torch.matmul(d_out, v_new.mT).mul_(scale)  # d(q k^T * L), the scale folded in
    d_k_to_end = torch.matmul(v_new, d_leaving.mT)
    d_chunk_decay = (entering * d_leaving).sum((-2, -1))
    d_initial_state = d_states[0].clone()
    # Large intermediates are dropped as soon as they are used: they set the peak memory.
    del d_state, d_states, d_leaving
    # u = v_new + w S; dw = -dv_new S^T; du = dv_new; then through M
    u = v_new.flatten(0, 1).baddbmm(w.flatten(0, 1), entering.flatten(0, 1)).view_as(v_new)
    d_x_u = torch.matmul(inverse.mT, d_v_new)
    d_x_w = torch.matmul(inverse.mT, torch.matmul(d_v_new, entering.mT)).neg_()
    del d_v_new
    d_a = torch.matmul(d_x_w, w.mT).add_(torch.matmul(d_x_u, u.mT)).neg_().tril_(-1)
    del u

    d_a_inside = d_a * inside
    d_scores_inside = d_scores * inside
    d_k_beta = torch.matmul(d_a_inside, k).add_(d_x_w * from_start[..., None])
    d_q = torch.matmul(d_scores_inside, k).add_(d_q_from_start.mul(scale * from_start[..., None]))
    d_k = torch.matmul(d_a_inside.mT, k_beta).add_(torch.matmul(d_scores_inside.mT, q))
    d_k.add_(d_k_beta * beta[..., None]).add_(d_k_to_end * to_end[..., None])
    d_v = d_x_u * beta[..., None]
    d_beta = (v * d_x_u).sum(-1).add_((k * d_k_beta).sum(-1))

    # d(loss)/d(log L_ij), over the strict lower triangle (the diagonal is exp(0): no gate)
    d_log_inside = d_a.mul_(torch.matmul(k_beta, k.mT)).add_(d_scores.mul_(q_k)).mul_(inside).tril_(-1)
    d_from_start = (q * d_q_from_start).sum(-1).mul_(scale).add_((k_beta * d_x_w).sum(-1)).mul_(from_start)
    d_to_end = (k_to_end * d_k_to_end).sum(-1)
    d_g = _gate_gradient(d_from_start, d_to_end, d_chunk_decay * from_start[..., -1], d_log_inside)
    return d_q, d_k, d_v, d_g, d_beta, d_initial_state


def _gate_gradient(d_from_start, d_to_end, d_chunk_decay, d_log_inside) -> torch.Tensor:
    """dg (N, BH, C) from the gradients of the log decays that each g_l is a term of.

    d_from_start[i] (gc_i: steps <= i), d_to_end[i] (gc_last - gc_i: steps > i), d_chunk_decay
    (gc_last: every step; (N, BH)) and d_log_inside[i, j] (gc_i - gc_j: steps j < l <= i).
    """
    d_g = d_from_start.flip(-1).cumsum(-1).flip(-1)  # sum over i >= l
    d_g[..., 1:] += d_to_end[..., :-1].cumsum(-1)  # sum over i < l
    d_g += d_chunk_decay[..., None]
    # sum over i >= l of row i, then over columns j < l
    below = d_log_inside.flip(-2).cumsum(-2).flip(-2)
    return d_g.add_(below.tril_(-1).sum(-1))
