"""KDA as a KernelFamily: the gated delta rule's cases with a decay per key channel."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from hypothesis import strategies as st

from ...kernels import kda
from ..kernels import KernelCase, KernelFamily
from .draws import DTYPES, generator
from .gated_delta_rule import gated_delta_rule_cases


@st.composite
def kda_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    case = draw(gated_delta_rule_cases(batch, length, dtype))
    g = F.logsigmoid(torch.randn(case.inputs["k"].shape, generator=generator(draw)) + 2).to(dtype)
    return KernelCase({**case.inputs, "g": g}, case.state, case.options)


def run_kda(inputs, state, backend, options):
    return kda(**inputs, initial_state=state, output_final_state=True, chunk_size=options["chunk_size"],
               backend=backend, cu_seqlens=options.get("cu_seqlens"))


KDA = KernelFamily("kda", kda_cases, run_kda, dtypes=DTYPES, same_dtype=("q", "k", "v"))
