"""When a Triton kernel may run: on CUDA tensors, or anywhere under the Triton interpreter.

Triton reads TRITON_INTERPRET when a kernel is decorated, so the Triton kernel modules are imported
on first use (never by `import layerzoo`) and the variable must be set before that first call.
The CPU tests set it in tests/conftest.py; on a GPU the compiled kernels run.
"""

from __future__ import annotations

import os

import torch

from .backends import installed


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
