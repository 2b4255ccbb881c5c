"""Choosing a backend: the names every family gives its backends, which optional libraries are
there to choose from, when Triton may run, and the rule every family's "auto" follows.

Triton reads TRITON_INTERPRET when a kernel is decorated, so the Triton kernel modules are imported
on first use (never by `import layerzoo`) and the variable must be set before that first call.
The CPU tests set it in tests/conftest.py; on a GPU the compiled kernels run.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

import torch

from ...errors import unknown_name_message
from .autocast import outside_autocast

# Every family names its backends from this list, in this order, so that one name means one kind
# of implementation everywhere and a user can force each by name.
NAMES = {
    "reference": "the truth: a step loop or a dense mask, in PyTorch",
    "chunkwise": "PyTorch, a chunk of tokens at a time in batched matmuls",
    "native": "the compiled C++ CPU kernel (built on first use)",
    "triton": "layerzoo's own Triton kernels (CUDA; CPU under TRITON_INTERPRET=1)",
    "fla": "flash-linear-attention's Triton kernels (CUDA)",
    "sdpa": "torch's scaled_dot_product_attention",
    "flex": "torch's flex_attention (CUDA)",
}

REFERENCE = "reference"


@dataclass(frozen=True)
class Backend:
    """One backend of a kernel family: `run`, which takes the family's arguments by keyword, and
    which of the call's optional arguments it takes besides: "chunk_size"; "bounds", the offsets
    of packed sequences (B = 1), for a backend that runs them at once; "sinks" (attention)."""

    run: Callable[..., Any]
    takes: tuple[str, ...] = ()

    @outside_autocast
    def __call__(self, *, optional: Mapping[str, Any] = {}, **arguments: Any) -> Any:
        """run(**arguments), with those of `optional` that it takes, autocast off (the kernel keeps
        its own precision: autocast.py)."""
        return self.run(**arguments, **{name: optional[name] for name in self.takes if name in optional})


def taking(backends: Mapping[str, Backend], option: str) -> tuple[str, ...]:
    """The names of the backends that take `option` ("bounds": packed sequences at once)."""
    return tuple(name for name, backend in backends.items() if option in backend.takes)


def autograd_records(*tensors: torch.Tensor | None) -> bool:
    """Whether autograd records a call on `tensors` (None skipped): grad mode is on and one of them
    requires grad. A compiled kernel without a backward gives way to PyTorch there."""
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)


def constant_when_traced(fn: Callable) -> Callable:
    """Mark fn as torch.compiler.assume_constant_result does: torch.compile and strict
    torch.export call it when they trace and keep its result in the graph as a constant, so what
    it does to find the answer (a search of the import path, a build, log lines) stays out.

    It sets the attribute that decorator sets, because the decorator imports torch._dynamo (and
    with it Triton, which must load on first use), doubling the time of `import layerzoo`.
    """
    fn._dynamo_marked_constant = True
    return fn


@constant_when_traced
def installed(package: str) -> bool:
    """Whether an optional package (triton, fla, ...) can be imported, without importing it.
    A constant to torch.compile (see constant_when_traced)."""
    return _on_import_path(package)


@functools.cache
def _on_import_path(package: str) -> bool:
    return importlib.util.find_spec(package) is not None


def choose_backend(kind: str, backend: str, backends: Iterable[str], fast: Callable[[], str],
                   length: int | None = None, renamed: Mapping[str, str] = {}) -> str:
    """The backend a call runs: `backend` when it names one of `backends`; for "auto", REFERENCE
    when `length` is 1 (a single token is one step of the loop: the least work, as in decoding;
    length None for families without a step loop), else fast(), which is asked only then (it may
    build a compiled kernel to find out).

    Raises a one-line ValueError for anything else, with a did-you-mean: the new name of an old
    one (`renamed`: old -> new), else the closest known name; `kind` names what is chosen
    ("mLSTM backend").
    """
    backends = list(backends)
    if backend in renamed:
        known = ", ".join(sorted([*backends, "auto"]))
        raise ValueError(f"unknown {kind} {backend!r}; did you mean {renamed[backend]!r}? (known: {known})")
    if backend != "auto" and backend not in backends:
        raise ValueError(unknown_name_message(kind, backend, [*backends, "auto"]))
    if backend != "auto":
        return backend
    return REFERENCE if length == 1 else fast()


def require_cpu(t: torch.Tensor) -> None:
    """A one-line ValueError unless `t` is on the CPU, where the "native" backends run."""
    if t.device.type != "cpu":
        raise ValueError(f"the 'native' backend runs on the CPU, got {t.device}")


def triton_interpreting() -> bool:
    """True when TRITON_INTERPRET asks for the interpreter (kernels run on CPU tensors)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() not in ("", "0", "false", "no")


def triton_can_run(t: torch.Tensor) -> bool:
    """Whether a Triton kernel can run on tensors like `t` in this process."""
    if not installed("triton"):
        return False
    return t.is_cuda or (triton_interpreting() and t.device.type == "cpu")


def require_triton(t: torch.Tensor, kernel: str, dtypes: tuple[torch.dtype, ...] | None = None) -> None:
    """Raise a one-line ValueError when the Triton backend of `kernel` cannot run on `t`: no
    triton, a device it cannot reach, or a dtype outside `dtypes` (None: any)."""
    if not triton_can_run(t):
        if not installed("triton"):
            raise ValueError(f"{kernel}: the 'triton' backend needs the triton package, which is not installed")
        raise ValueError(
            f"{kernel}: the 'triton' backend needs CUDA tensors (got {t.device}); "
            f"set TRITON_INTERPRET=1 to run it on CPU through the Triton interpreter"
        )
    if dtypes is not None and t.dtype not in dtypes:
        names = ", ".join(str(dtype).removeprefix("torch.") for dtype in dtypes)
        raise ValueError(f"{kernel}: the 'triton' backend supports {names}, got {t.dtype}")
