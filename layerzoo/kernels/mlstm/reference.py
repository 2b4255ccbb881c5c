"""The mLSTM recurrence one token at a time: the slow, obviously-correct truth the fast paths match.

Stabilised mLSTM as in NX-AI's mlstm_kernels, per batch row and head, states in fp32:

    log_f = logsigmoid(f_t);   m_t = max(log_f + m_{t-1}, i_t)
    f' = exp(log_f + m_{t-1} - m_t);   i' = exp(i_t - m_t)
    C_t = f' C_{t-1} + i' k_t v_t^T;   n_t = f' n_{t-1} + i' k_t
    h_t = (q_t C_t) / (max(|q_t . n_t|, exp(-m_t)) + EPS),   q_t scaled by Dk^-0.5

m only guards exp() against overflow: the true state is C exp(m), n exp(m). Unrolled, m_t is the
largest log-weight of any term in the state (m_0 + sum of log_f, or i_j + the log_f after j),
which is what the chunkwise form computes directly, so both carry the same m.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..common.dtypes import compute_dtype

# Added to the denominator of h, as in mlstm_kernels.
EPS = 1e-6


@dataclass
class MLSTMState:
    """The recurrent state of an mLSTM, in the stabilised form (true state = C exp(m), n exp(m)).

    C: (B, H, Dk, Dv) matrix memory; n: (B, H, Dk) normaliser; m: (B, H) log-scale stabiliser.
    fp32 whatever the input dtype (fp64 for fp64 inputs). The empty state is all zeros. Unpacks as
    `C, n, m = state`; kernels also accept a plain (C, n, m) tuple as initial state.

    Attributes:
        C: (B, H, Dk, Dv) matrix memory.
        n: (B, H, Dk) normaliser.
        m: (B, H) log-scale stabiliser.
    """

    C: torch.Tensor
    n: torch.Tensor
    m: torch.Tensor

    def __iter__(self):
        return iter((self.C, self.n, self.m))

    @classmethod
    def empty(cls, batch: int, heads: int, key_dim: int, value_dim: int, dtype=torch.float32, device=None) -> MLSTMState:
        """The all-zero state mlstm_kernels starts from."""
        like = {"dtype": dtype, "device": device}
        return cls(
            torch.zeros(batch, heads, key_dim, value_dim, **like),
            torch.zeros(batch, heads, key_dim, **like),
            torch.zeros(batch, heads, **like),
        )


def mlstm_step(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, i: torch.Tensor, f: torch.Tensor, state: MLSTMState
) -> tuple[torch.Tensor, MLSTMState]:
    """One token: q, k (B, H, Dk); v (B, H, Dv); i, f (B, H) gate pre-activations; state.

    Returns h (B, H, Dv) and the new state, both in the state's dtype; inputs are cast to it.
    The state passed in is not modified.

    Args:
        q: (B, H, Dk) query of the token.
        k: (B, H, Dk) key.
        v: (B, H, Dv) value.
        i: (B, H) input gate pre-activation.
        f: (B, H) forget gate pre-activation.
        state: the MLSTMState before the token (C (B, H, Dk, Dv), n (B, H, Dk), m (B, H)).

    Returns:
        The pair (h, new MLSTMState): h (B, H, Dv), both in the state's dtype.
    """
    C, n, m = state
    q, k, v, i, f = (t.to(C.dtype) for t in (q, k, v, i, f))
    log_f = F.logsigmoid(f)
    m_new = torch.maximum(log_f + m, i)
    decay = torch.exp(log_f + m - m_new)
    gate = torch.exp(i - m_new)
    C = decay[..., None, None] * C + gate[..., None, None] * (k[..., :, None] * v[..., None, :])
    n = decay[..., None] * n + gate[..., None] * k
    q = q * q.shape[-1] ** -0.5
    numerator = torch.einsum("bhk,bhkv->bhv", q, C)
    denominator = torch.maximum((q * n).sum(-1).abs(), torch.exp(-m_new)) + EPS
    return numerator / denominator[..., None], MLSTMState(C, n, m_new)


def mlstm_reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    i: torch.Tensor,
    f: torch.Tensor,
    initial_state: MLSTMState | None = None,
) -> tuple[torch.Tensor, MLSTMState]:
    """The recurrence as a step loop over T; O(T) sequential steps, differentiable by autograd.

    Inputs are not validated here; `mlstm(..., backend="reference")` validates.

    Args:
        q: (B, T, H, Dk) queries, any float dtype; T >= 1.
        k: (B, T, H, Dk) keys.
        v: (B, T, H, Dv) values.
        i: (B, T, H) input gate pre-activations.
        f: (B, T, H) forget gate pre-activations.
        initial_state: None (empty) or an MLSTMState / (C, n, m) tuple of B rows.

    Returns:
        The pair (h, final MLSTMState): h (B, T, H, Dv) in q's dtype, the state in fp32 (fp64 for
            fp64 q).
    """
    batch, _, heads, key_dim = q.shape
    dtype = compute_dtype(q.dtype)
    if initial_state is None:
        state = MLSTMState.empty(batch, heads, key_dim, v.shape[-1], dtype, q.device)
    else:
        state = MLSTMState(*(t.to(dtype) for t in initial_state))
    outputs = []
    # unbind, not q[:, t]: each index op's backward would write a zero tensor of the whole sequence.
    for q_t, k_t, v_t, i_t, f_t in zip(*(x.unbind(1) for x in (q, k, v, i, f))):
        h, state = mlstm_step(q_t, k_t, v_t, i_t, f_t, state)
        outputs.append(h)
    return torch.stack(outputs, dim=1).to(q.dtype), state
