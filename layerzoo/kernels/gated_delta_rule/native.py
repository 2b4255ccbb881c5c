"""The "native" backend: the gated delta rule's compiled CPU forward and backward (cpu_forward.cpp,
cpu_backward.cpp), built on first use by native_build.py, inside chunkwise.py's autograd Function."""

from __future__ import annotations

from pathlib import Path

import torch

from ..common.native_build import compiled_ops
from .chunkwise import gated_delta_rule_chunkwise
from .native_ops import register_for_tracing

HERE = Path(__file__).parent
SOURCES = [HERE / "cpu_forward.cpp", HERE / "cpu_backward.cpp"]
COMPILED = compiled_ops("gated_delta_rule", SOURCES, [HERE / "cpu_common.h", HERE.parent / "common" / "native_common.h"],
                        "gated delta rule", register_for_tracing)

# native_ops_for(t): torch.ops.layerzoo (gated_delta_rule_forward, its functional form and
# _backward) where they run on t (CPU, not turned off), else None. They take fp32 and fp64, the
# chunkwise kernel's compute dtypes. load_native_ops, build_directory: see CompiledOps.
native_ops_for, load_native_ops, build_directory = COMPILED.ops_for, COMPILED.load, COMPILED.build_directory


def gated_delta_rule_native(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g: torch.Tensor, beta: torch.Tensor,
                            scale: float, initial_state: torch.Tensor | None,
                            chunk_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule by the compiled kernels, as gated_delta_rule_chunkwise takes and returns
    it (differentiable, the backward compiled too); its PyTorch code off the CPU or where they are
    turned off (LAYERZOO_NATIVE=0) or cannot be built."""
    return gated_delta_rule_chunkwise(q, k, v, g, beta, scale, initial_state, chunk_size, ops=native_ops_for(q))
