"""The backends of the built-in kernel families (layerzoo.testing.families) that run on this
machine, each as the conformance tests run it (tests/kernels/test_kernel_conformance.py checks
every one), and what makes a "native" backend run its compiled kernel rather than fall back."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from dataclasses import dataclass
from typing import Callable, ContextManager, Sequence
from unittest import mock

import pytest
import torch

from layerzoo.kernels.common.backends import triton_can_run
from layerzoo.kernels.common.native_build import CompiledOps
from layerzoo.kernels.gated_delta_rule import native
from layerzoo.kernels.kda import native as kda_native
from layerzoo.kernels.mlstm import native as mlstm_native
from layerzoo.kernels.sliding_window import native as swa_native
from layerzoo.kernels.ssd import native as ssd_native
from layerzoo.testing import KernelFamily
from layerzoo.testing.families import ASSOCIATIVE_MEMORY, GATED_DELTA_RULE, KDA, MLSTM, SLIDING_WINDOW, SSD


def built(compiled: CompiledOps):
    """A family's compiled CPU ops (its native.COMPILED), built if need be; the test fails without them."""
    ops = compiled.load()
    if ops is None:
        pytest.fail(f"the compiled CPU kernels {compiled.name} did not build (see the warning logged above)")
    return ops


@contextlib.contextmanager
def compiled_present(compiled: CompiledOps):
    """Within the block the "native" backend runs its compiled kernel, not the chunkwise code it
    falls back to where the kernel is not built (the test fails then) or turned off."""
    built(compiled)
    with mock.patch.dict(os.environ, {"LAYERZOO_NATIVE": "1"}):
        yield


def running(backend: str, compiled: CompiledOps):
    """Where `backend` runs its own code: "native" with its compiled kernel (compiled_present); any
    other as it is."""
    return compiled_present(compiled) if backend == "native" else contextlib.nullcontext()


def compiled_gated_delta_rule():
    return built(native.COMPILED)


@dataclass(frozen=True)
class Backend:
    """One backend of a family as the conformance tests run it: under `context`, on inputs of
    `dtypes` (default: the family's)."""

    family: KernelFamily
    name: str
    context: Callable[[], ContextManager] = contextlib.nullcontext
    dtypes: Sequence[torch.dtype] | None = None

    def __str__(self) -> str:
        return f"{self.family.name}-{self.name}"


BACKENDS = [
    Backend(SLIDING_WINDOW, "reference"),
    Backend(SLIDING_WINDOW, "chunkwise"),
    Backend(SLIDING_WINDOW, "native", context=lambda: compiled_present(swa_native.COMPILED)),
    Backend(SLIDING_WINDOW, "sdpa"),
    Backend(MLSTM, "reference"),
    Backend(MLSTM, "chunkwise"),
    Backend(MLSTM, "native", context=lambda: compiled_present(mlstm_native.COMPILED)),
    Backend(GATED_DELTA_RULE, "reference"),
    Backend(GATED_DELTA_RULE, "chunkwise"),
    Backend(GATED_DELTA_RULE, "native", context=lambda: compiled_present(native.COMPILED)),
    Backend(ASSOCIATIVE_MEMORY, "reference"),
    Backend(ASSOCIATIVE_MEMORY, "chunkwise"),
    Backend(SSD, "reference"),
    Backend(SSD, "chunkwise"),
    # SSD's, KDA's and the mLSTM's native kernel is a forward: a call autograd records runs chunkwise
    Backend(SSD, "native", context=lambda: compiled_present(ssd_native.COMPILED)),
    Backend(KDA, "reference"),
    Backend(KDA, "chunkwise"),
    Backend(KDA, "native", context=lambda: compiled_present(kda_native.COMPILED)),
]
# "auto" picks among the above by length ("reference" for a single token) and device.
AUTO = [Backend(family, "auto") for family in (SLIDING_WINDOW, MLSTM, GATED_DELTA_RULE, ASSOCIATIVE_MEMORY, SSD, KDA)]
# The Triton backends run here under the interpreter (tests/conftest.py), which costs milliseconds
# per tile op: one sequence of a few tokens, in the dtypes each kernel takes.
TRITON = importlib.util.find_spec("triton") is not None and triton_can_run(torch.zeros(0))
TRITON_BACKENDS = [
    Backend(SLIDING_WINDOW, "triton", dtypes=(torch.float32, torch.bfloat16)),
    Backend(MLSTM, "triton", dtypes=(torch.float32, torch.float64)),
] if TRITON else []
