"""The mLSTM as a KernelFamily.

States compare in one stabiliser frame (C exp(m - m_like), n exp(m - m_like)), which is the true
state up to one factor, so implementations carrying different stabilisers compare equal.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ...kernels import MLSTMState, mlstm
from ..kernels import KernelCase, KernelFamily
from .draws import DTYPES, generator


@st.composite
def mlstm_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, key_dim, value_dim = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([3, 4]))
    gen = generator(draw)
    shape = (batch, length, heads)
    q, k = (torch.randn(*shape, key_dim, generator=gen) for _ in range(2))
    if dtype != torch.float64:  # no cancellation in q . n, where rounding would decide the result
        q, k = q.abs(), k.abs()
    inputs = {"q": q, "k": k, "v": torch.randn(*shape, value_dim, generator=gen),
              "i": 3 * torch.randn(shape, generator=gen), "f": 2 + 3 * torch.randn(shape, generator=gen)}
    inputs = {name: t.to(dtype) for name, t in inputs.items()}
    state_dtype = torch.promote_types(dtype, torch.float32)
    state = MLSTMState(torch.randn(batch, heads, key_dim, value_dim, generator=gen),
                       torch.randn(batch, heads, key_dim, generator=gen).abs(),  # a sum of k >= 0
                       2 * torch.randn(batch, heads, generator=gen))
    state = MLSTMState(*(t.to(state_dtype) for t in state))
    return KernelCase(inputs, state, {"chunk_size": draw(st.sampled_from([1, 3, 16]))})


def run_mlstm(inputs, state, backend, options):
    return mlstm(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"], backend=backend,
                 cu_seqlens=options.get("cu_seqlens"))


def in_frame(state: MLSTMState, m: torch.Tensor, dtype: torch.dtype | None = None) -> list[torch.Tensor]:
    """(C, n) rescaled to the stabiliser m, C exp(state.m - m) and n exp(state.m - m), computed in
    `dtype` (default the state's): the true state up to one factor, the same for every implementation."""
    C, n, own_m = (t.to(dtype or state.m.dtype) for t in state)
    factor = torch.exp(own_m - m.to(own_m))
    return [C * factor[..., None, None], n * factor[..., None]]


MLSTM = KernelFamily(
    "mlstm", mlstm_cases, run_mlstm, dtypes=DTYPES, comparable=lambda state, like: in_frame(state, like.m.detach()),
    same_dtype=("q", "k", "v"),
)
