"""The compiled CPU forward and backward (cpu_forward.cpp, cpu_backward.cpp): built on first use,
then loaded from torch's cache.

The build runs once per machine, torch version and source (about 40 s on 2 cores;
torch.utils.cpp_extension keeps it under ~/.cache/torch_extensions, or $TORCH_EXTENSIONS_DIR). It
needs a C++ compiler and ninja; without them, or with LAYERZOO_NATIVE=0, the chunkwise kernel runs
its PyTorch forward and backward, which compute the same thing more slowly.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
from pathlib import Path

import torch

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
SOURCES = [HERE / "cpu_forward.cpp", HERE / "cpu_backward.cpp"]
HEADERS = [HERE / "cpu_common.h"]
# torch rebuilds a cached extension when its .cpp sources or flags change, not when torch or a
# header does: both go into the name, so a build never loads into the wrong torch or stays stale.
NAME = "layerzoo_gated_delta_rule_cpu_torch_{}_{}".format(
    re.sub(r"\W", "_", torch.__version__),
    hashlib.sha256(b"".join(p.read_bytes() for p in SOURCES + HEADERS)).hexdigest()[:12],
)


def native_ops_for(t: torch.Tensor):
    """torch.ops.layerzoo (gated_delta_rule_forward and _backward) if they can run on t's device
    (CPU) and are not turned off, else None. They take fp32 and fp64, the chunkwise kernel's
    compute dtypes."""
    if t.device.type != "cpu" or os.environ.get("LAYERZOO_NATIVE", "1") == "0":
        return None
    return load_native_ops()


@functools.cache
def load_native_ops():
    """torch.ops.layerzoo, built if need be; None (and a warning, once) when it cannot be built or
    loaded."""
    from torch.utils import cpp_extension

    log.info("layerzoo: loading the compiled CPU gated delta rule (built on first use)")
    try:
        cpp_extension.load(
            name=NAME,
            sources=[str(p) for p in SOURCES],
            # -fopenmp so that ATen's parallel_for (a header template) runs its heads in parallel;
            # not linked: the OpenMP symbols resolve to the runtime libtorch_cpu already loaded
            extra_cflags=["-O3", "-fopenmp"],
            is_python_module=False,
        )
    except Exception as error:  # no compiler, no ninja, no BLAS symbols: fall back, say why once
        log.warning("layerzoo: compiled CPU gated delta rule unavailable (%s); using the PyTorch one", _reason(error))
        return None
    return torch.ops.layerzoo


def _reason(error: Exception) -> str:
    """One line on why a build failed: the compiler's first error where there is one (a failed
    build's message starts with the whole compile command), else the message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [type(error).__name__])[0]
