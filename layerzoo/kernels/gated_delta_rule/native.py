"""The compiled CPU forward and backward of the gated delta rule (cpu_forward.cpp,
cpu_backward.cpp), built on first use by native_build.py."""

from __future__ import annotations

from pathlib import Path

from ..common.native_build import compiled_ops
from .native_ops import register_for_tracing

HERE = Path(__file__).parent
SOURCES = [HERE / "cpu_forward.cpp", HERE / "cpu_backward.cpp"]
COMPILED = compiled_ops("gated_delta_rule", SOURCES, [HERE / "cpu_common.h", HERE.parent / "common" / "native_common.h"],
                        "gated delta rule", register_for_tracing)

# native_ops_for(t): torch.ops.layerzoo (gated_delta_rule_forward, its functional form and
# _backward) where they run on t (CPU, not turned off), else None. They take fp32 and fp64, the
# chunkwise kernel's compute dtypes. load_native_ops, build_directory: see CompiledOps.
native_ops_for, load_native_ops, build_directory = COMPILED.ops_for, COMPILED.load, COMPILED.build_directory
