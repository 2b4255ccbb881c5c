"""The compiled CPU forward and backward of the gated delta rule (cpu_forward.cpp,
cpu_backward.cpp), built on first use by native_build.py."""

from __future__ import annotations

import functools
from pathlib import Path

import torch

from ..common import constant_when_traced
from ..native_build import build_extension, extension_name, turned_off
from ..native_build import build_directory as _build_directory
from .native_ops import register_for_tracing

HERE = Path(__file__).parent
SOURCES = [HERE / "cpu_forward.cpp", HERE / "cpu_backward.cpp"]
NAME = extension_name("gated_delta_rule", SOURCES, [HERE / "cpu_common.h", HERE.parent / "cpu_gemm.h"])


def native_ops_for(t: torch.Tensor):
    """torch.ops.layerzoo (gated_delta_rule_forward, its functional form and _backward) if they can
    run on t's device (CPU) and are not turned off, else None. They take fp32 and fp64, the
    chunkwise kernel's compute dtypes."""
    return torch.ops.layerzoo if t.device.type == "cpu" and native_enabled() else None


@constant_when_traced
def native_enabled() -> bool:
    """Whether the compiled ops run on CPU: not turned off by LAYERZOO_NATIVE=0, and loaded (the
    first call builds them). A constant to torch.compile, which calls it when it traces: the
    build, its log lines and its file lock stay out of graphs."""
    return not turned_off() and load_native_ops() is not None


@functools.cache
def load_native_ops():
    """torch.ops.layerzoo, built if need be; None (and a warning, once) when it cannot be built or
    loaded."""
    if not build_extension(NAME, SOURCES, "gated delta rule"):
        return None
    register_for_tracing()
    return torch.ops.layerzoo


def build_directory() -> Path:
    """Where this extension is built and cached."""
    return _build_directory(NAME)
