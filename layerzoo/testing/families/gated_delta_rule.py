"""The gated delta rule as a KernelFamily, with L2-normalised keys and typical gates (as Gated
DeltaNet feeds it)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from ...kernels import gated_delta_rule
from ..kernels import KernelCase, KernelFamily
from .draws import DTYPES, generator


@st.composite
def gated_delta_rule_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    heads, key_dim, value_dim = draw(st.integers(1, 2)), draw(st.sampled_from([2, 4])), draw(st.sampled_from([3, 4]))
    gen = generator(draw)
    shape = (batch, length, heads)
    inputs = {
        "q": torch.randn(*shape, key_dim, generator=gen).to(dtype),
        "k": F.normalize(torch.randn(*shape, key_dim, generator=gen), dim=-1).to(dtype),
        "v": torch.randn(*shape, value_dim, generator=gen).to(dtype),
        "g": F.logsigmoid(torch.randn(shape, generator=gen) + 2).to(dtype),
        "beta": torch.rand(shape, generator=gen).to(dtype),
    }
    state = torch.randn(batch, heads, key_dim, value_dim, generator=gen).to(torch.promote_types(dtype, torch.float32))
    return KernelCase(inputs, state, {"chunk_size": draw(st.sampled_from([2, 3, 16]))})


def run_gated_delta_rule(inputs, state, backend, options):
    return gated_delta_rule(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"],
                            backend=backend, cu_seqlens=options.get("cu_seqlens"))


GATED_DELTA_RULE = KernelFamily(
    "gated_delta_rule", gated_delta_rule_cases, run_gated_delta_rule, dtypes=DTYPES, same_dtype=("q", "k", "v"),
)
