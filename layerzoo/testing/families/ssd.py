"""SSD as a KernelFamily: the gated delta rule's cases with its own keys and no beta (Mamba-2's
keys are dt B, not normalised)."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from ...kernels import ssd
from ..kernels import KernelCase, KernelFamily
from .draws import DTYPES, generator
from .gated_delta_rule import gated_delta_rule_cases


@st.composite
def ssd_cases(draw, batch: int, length: int, dtype: torch.dtype) -> KernelCase:
    case = draw(gated_delta_rule_cases(batch, length, dtype))
    inputs = {name: case.inputs[name] for name in ("q", "v", "g")}
    inputs["k"] = torch.randn(case.inputs["k"].shape, generator=generator(draw)).to(dtype)
    return KernelCase(inputs, case.state, case.options)


def run_ssd(inputs, state, backend, options):
    return ssd(inputs["q"], inputs["k"], inputs["v"], inputs["g"], initial_state=state, output_final_state=True,
               chunk_size=options["chunk_size"], backend=backend, cu_seqlens=options.get("cu_seqlens"))


SSD = KernelFamily("ssd", ssd_cases, run_ssd, dtypes=DTYPES, same_dtype=("q", "k", "v"))
