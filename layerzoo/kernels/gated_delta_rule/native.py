"""The compiled CPU forward and backward (cpu_forward.cpp, cpu_backward.cpp): built on first use,
then loaded from torch's cache.

The build runs once per machine, Python, torch version and source (torch.utils.cpp_extension
keeps it under ~/.cache/torch_extensions, or $TORCH_EXTENSIONS_DIR). It needs a C++ compiler and
ninja; without them, or with LAYERZOO_NATIVE=0, the chunkwise kernel runs its PyTorch forward and
backward, which compute the same thing more slowly.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import sys
from pathlib import Path
from typing import Iterator

try:  # POSIX; elsewhere a stale lock is left to torch
    import fcntl
except ImportError:
    fcntl = None

import torch

from ..common import constant_when_traced
from .native_ops import register_for_tracing

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
    """torch.ops.layerzoo (gated_delta_rule_forward, its functional form and _backward) if they can
    run on t's device (CPU) and are not turned off, else None. They take fp32 and fp64, the
    chunkwise kernel's compute dtypes."""
    return torch.ops.layerzoo if t.device.type == "cpu" and native_enabled() else None


@constant_when_traced
def native_enabled() -> bool:
    """Whether the compiled ops run on CPU: not turned off by LAYERZOO_NATIVE=0, and loaded (the
    first call builds them). A constant to torch.compile, which calls it when it traces: the
    build, its log lines and its file lock stay out of graphs."""
    return os.environ.get("LAYERZOO_NATIVE", "1") != "0" and load_native_ops() is not None


@functools.cache
def load_native_ops():
    """torch.ops.layerzoo, built if need be; None (and a warning, once) when it cannot be built or
    loaded."""
    from torch.utils import cpp_extension

    log.info("layerzoo: loading the compiled CPU gated delta rule (built on first use)")
    directory = build_directory()
    try:
        with build_lock(directory):
            cpp_extension.load(
                name=NAME,
                sources=[str(p) for p in SOURCES],
                # -fopenmp so that ATen's parallel_for (a header template) runs its heads in parallel;
                # not linked: the OpenMP symbols resolve to the runtime libtorch_cpu already loaded
                extra_cflags=["-O3", "-fopenmp"],
                build_directory=str(directory),
                is_python_module=False,
            )
    except Exception as error:  # no compiler, no ninja, no BLAS symbols: fall back, say why once
        log.warning("layerzoo: compiled CPU gated delta rule unavailable (%s); using the PyTorch one", _reason(error))
        return None
    register_for_tracing()
    return torch.ops.layerzoo


def build_directory() -> Path:
    """Where the extension is built and cached: torch's extension root, one folder per Python
    version (the build compiles against its headers) and NAME."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / f"py{sys.version_info.major}{sys.version_info.minor}_cpu" / NAME


@contextlib.contextmanager
def build_lock(directory: Path) -> Iterator[None]:
    """Held while this process builds or loads the extension. torch's own `lock` file outlives a
    process killed mid-build and makes every later load wait forever; this lock is an OS file lock,
    which dies with its holder, so whoever holds it knows any `lock` file left is stale."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "layerzoo.lock", "w") as handle:
        if fcntl is not None:
            fcntl.flock(handle, fcntl.LOCK_EX)
        stale = directory / "lock"
        if fcntl is not None and stale.exists():
            log.warning("layerzoo: removing %s, left by a build that did not finish", stale)
            stale.unlink(missing_ok=True)
        yield


def _reason(error: Exception) -> str:
    """One line on why a build failed: the compiler's first error where there is one (a failed
    build's message starts with the whole compile command), else the message's first line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    errors = [line for line in lines if "error:" in line]
    return (errors or lines or [type(error).__name__])[0]
