"""The compiled CPU forward (cpu_forward.cpp): built on first use, then loaded from torch's cache.

The build runs once per machine and torch version (about 30 s on 2 cores; torch.utils.cpp_extension
keeps it under ~/.cache/torch_extensions, or $TORCH_EXTENSIONS_DIR). It needs a C++ compiler and
ninja; without them, or with LAYERZOO_NATIVE=0, the chunkwise kernel uses its PyTorch forward,
which computes the same thing about half as fast on CPU.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from pathlib import Path
from typing import Callable

import torch

log = logging.getLogger(__name__)

SOURCE = Path(__file__).with_name("cpu_forward.cpp")
# torch rebuilds a cached extension when its sources or flags change, not when torch does: the
# torch version in the name keeps a build against one torch's headers from loading into another.
NAME = "layerzoo_gated_delta_rule_cpu_torch_" + re.sub(r"\W", "_", torch.__version__)


def native_forward_for(q: torch.Tensor) -> Callable | None:
    """The compiled forward if it can run on q's device (CPU) and is not turned off, else None.
    It takes fp32 and fp64, the chunkwise kernel's compute dtypes."""
    if q.device.type != "cpu" or os.environ.get("LAYERZOO_NATIVE", "1") == "0":
        return None
    return load_native_forward()


@functools.cache
def load_native_forward() -> Callable | None:
    """torch.ops.layerzoo.gated_delta_rule_forward, built if need be; None (and a warning, once)
    when it cannot be built or loaded."""
    from torch.utils import cpp_extension

    log.info("layerzoo: loading the compiled CPU gated delta rule forward (built on first use)")
    try:
        cpp_extension.load(
            name=NAME,
            sources=[str(SOURCE)],
            # -fopenmp so that ATen's parallel_for (a header template) runs its heads in parallel;
            # not linked: the OpenMP symbols resolve to the runtime libtorch_cpu already loaded
            extra_cflags=["-O3", "-fopenmp"],
            is_python_module=False,
        )
    except Exception as error:  # no compiler, no ninja, no BLAS symbols: fall back, say why once
        log.warning("layerzoo: compiled CPU gated delta rule unavailable (%s); using the PyTorch forward", _reason(error))
        return None
    return torch.ops.layerzoo.gated_delta_rule_forward


def _reason(error: Exception) -> str:
    """One line on why a build failed: the compiler's first error where there is one (a failed
    build's message starts with the whole compile command), else the message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [type(error).__name__])[0]
