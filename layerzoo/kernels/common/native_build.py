"""Compiled CPU kernels: C++ sources built on first use with torch.utils.cpp_extension, then loaded
from torch's cache.

A build runs once per Python environment (its folder and torch install), checkout, torch version
and source, in a folder of its own under torch's cache (~/.cache/torch_extensions, or
$TORCH_EXTENSIONS_DIR): its build files hold those paths, so environments sharing the cache never
rebuild each other's kernels nor wait on each other's lock. A build says so on stderr
(or to whoever reports builds: the trainer's progress bar), as does waiting for another process's.
It needs a C++ compiler and ninja; without them, or with LAYERZOO_NATIVE=0, each family's
chunkwise kernel runs its PyTorch code, which computes the same thing more slowly. Every extension
registers its ops in the torch.ops.layerzoo namespace (TORCH_LIBRARY_FRAGMENT, so families load
independently).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

try:  # POSIX; elsewhere a stale lock is left to torch
    import fcntl
except ImportError:
    fcntl = None

import torch

from .backends import constant_when_traced

log = logging.getLogger(__name__)
# -fopenmp so that ATen's parallel_for (a header template) runs its heads in parallel; not linked:
# the OpenMP symbols resolve to the runtime libtorch_cpu already loaded
BASE_FLAGS = ("-O3", "-fopenmp")


@dataclass(frozen=True)
class CompiledOps:
    """One family's compiled CPU ops (see compiled_ops).

    load(): torch.ops.layerzoo, built if need be; None (and a warning, once) when the extension
    cannot be built or loaded; cached (load.cache_clear() forgets). enabled(): whether the ops run:
    not turned off by LAYERZOO_NATIVE=0, and loaded (the first call builds them); a constant to
    torch.compile, which calls it when it traces, so the build, its log lines and its file lock
    stay out of graphs.
    """

    family: str
    name: str
    what: str
    load: Callable[[], Any]
    enabled: Callable[[], bool]

    def ops_for(self, t: torch.Tensor):
        """torch.ops.layerzoo if the ops can run on t's device (CPU) and are enabled, else None."""
        return torch.ops.layerzoo if t.device.type == "cpu" and self.enabled() else None

    def build_directory(self) -> Path:
        """Where this extension is built and cached."""
        return build_directory(self.name)

    def built(self) -> bool:
        """Whether this environment has built the extension (loading it then builds nothing)."""
        return library(self.name).is_file()


def compiled_ops(family: str, sources: list[Path], headers: list[Path], what: str,
                 register_for_tracing: Callable[[], None], flags: tuple[str, ...] = ()) -> CompiledOps:
    """The compiled CPU ops of `family`, built on first use from `sources` (which include
    `headers`) with compiler `flags` on top of the shared ones; `what` names them in log lines
    ("gated delta rule"). register_for_tracing() runs
    once they load: it gives torch.compile their fake implementations (torch checks that an op
    exists before taking its fake)."""
    name = extension_name(family, sources, headers, flags)

    @functools.cache
    def load():
        if not build_extension(name, sources, what, flags):
            return None
        register_for_tracing()
        return torch.ops.layerzoo

    @constant_when_traced
    def enabled() -> bool:
        return not turned_off() and load() is not None

    return CompiledOps(family, name, what, load, enabled)


def turned_off() -> bool:
    """Whether LAYERZOO_NATIVE=0 asks for the PyTorch kernels everywhere."""
    return os.environ.get("LAYERZOO_NATIVE", "1") == "0"


def extension_name(family: str, sources: list[Path], headers: list[Path], flags: tuple[str, ...] = ()) -> str:
    """The cache name of a family's extension: torch's version and a hash of the sources, headers
    and compiler flags, so that a library found under this name is this build's (build_extension
    loads it without asking torch's builder) and never one for another torch."""
    built_from = b"".join(p.read_bytes() for p in sources + headers) + " ".join((*BASE_FLAGS, *flags)).encode()
    return "layerzoo_{}_cpu_torch_{}_{}".format(
        family, re.sub(r"\W", "_", torch.__version__), hashlib.sha256(built_from).hexdigest()[:12])


def build_extension(name: str, sources: list[Path], what: str, flags: tuple[str, ...] = ()) -> bool:
    """Build (if need be) and load the extension `name`; False, with one warning saying why, when it
    cannot be built or loaded. `what` names the kernel in log lines ("gated delta rule"); `flags`
    are compiler flags on top of the shared ones. A build (one this process runs, not one it finds
    done) is reported when it starts and ends."""
    from torch.utils import cpp_extension

    log.info("layerzoo: loading the compiled CPU %s (built on first use)", what)
    if load_built(name):
        return True
    directory = build_directory(name)
    try:
        with build_lock(directory, what), contextlib.ExitStack() as building:
            if not library(name).is_file():  # looked at under the lock: another process may have just built it
                building.enter_context(announced(
                    f"layerzoo: building the compiled CPU {what} kernel, once for this Python environment "
                    "(a minute or two; `layerzoo kernels build` builds all of them up front)"))
            cpp_extension.load(
                name=name,
                sources=[str(p) for p in sources],
                extra_cflags=[*BASE_FLAGS, *flags],
                build_directory=str(directory),
                is_python_module=False,
            )
    except Exception as error:  # no compiler, no ninja, no BLAS symbols: fall back, say why once
        log.warning("layerzoo: compiled CPU %s unavailable (%s); using the PyTorch one", what, _reason(error))
        return False
    return True


def load_built(name: str) -> bool:
    """Load the finished library of `name` as it is, if there is one that loads: its name holds
    everything it was built from, so torch's builder (a ninja run under a file lock) would only
    find it up to date."""
    path = library(name)
    if not path.is_file():
        return False
    try:
        torch.ops.load_library(str(path))
    except (OSError, RuntimeError):  # a damaged or half-written file: the builder redoes it
        return False
    return True


def build_directory(name: str) -> Path:
    """Where the extension `name` is built and cached: torch's extension root, one folder per Python
    version and environment (see environment_key), and name."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return Path(root) / f"py{sys.version_info.major}{sys.version_info.minor}_cpu_{environment_key()}" / name


def environment_key() -> str:
    """A short hash of the paths a build's files hold: the Python environment's (sys.prefix, a
    virtual environment's own folder, whatever its interpreter is called), its torch install's
    and the kernel sources' (a checkout, or the environment's site-packages). A build whose files
    hold other paths is redone, so each environment and checkout gets a folder of its own."""
    places = (sys.prefix, Path(torch.__file__).parent, Path(__file__).parents[1])
    return hashlib.sha256("\n".join(str(Path(place).resolve()) for place in places).encode()).hexdigest()[:12]


def library(name: str) -> Path:
    """The library a finished build of the extension `name` leaves."""
    from torch.utils import cpp_extension

    return build_directory(name) / f"{name}{cpp_extension.LIB_EXT}"


# Who hears of builds, innermost last (see reporting_builds); with none, stderr does.
_reporters: list[Callable[[str | None], None]] = []


@contextlib.contextmanager
def reporting_builds(reporter: Callable[[str | None], None]) -> Iterator[None]:
    """Within the block, `reporter(message)` hears that a build (or the wait for another
    process's) starts, and `reporter(None)` that it ended, instead of a line on stderr: a progress
    bar shows them without breaking its own line."""
    _reporters.append(reporter)
    try:
        yield
    finally:
        _reporters.remove(reporter)


@contextlib.contextmanager
def announced(notice: str) -> Iterator[None]:
    """`notice` to the innermost reporter when the block starts and None when it ends, however it
    ends; with no reporter, the notice as a line on stderr."""
    if not _reporters:
        print(notice, file=sys.stderr, flush=True)
        yield
        return
    reporter = _reporters[-1]
    reporter(notice)
    try:
        yield
    finally:
        reporter(None)


@contextlib.contextmanager
def build_lock(directory: Path, what: str) -> Iterator[None]:
    """Held while this process builds or loads the extension; waiting for another process's is
    reported. torch's own `lock` file outlives a process killed mid-build and makes every later
    load wait forever; this lock is an OS file lock, which dies with its holder, so whoever holds
    it knows any `lock` file left is stale."""
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "layerzoo.lock", "w") as handle:
        if fcntl is not None:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # held: another process builds (or loads) it; say why we stand still
                with announced(f"layerzoo: waiting for another process building the compiled CPU {what} kernel "
                               f"({directory})"):
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
