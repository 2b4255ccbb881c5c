"""Maintained libraries' own implementations, loaded for cross-checks (tests) and timings (benchmarks)."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType


@functools.cache
def load_fla_naive(op: str = "gated_delta_rule") -> ModuleType | None:
    """flash-linear-attention's `ops/<op>/naive.py`, loaded from its file alone, once; None when
    fla is not installed. op: "gated_delta_rule" (naive_recurrent_ and naive_chunk_gated_delta_rule),
    "simple_gla" (naive_recurrent_ and naive_chunk_simple_gla), "kda" (naive_recurrent_ and
    naive_chunk_kda). They run on CPU; fla's Triton kernels do not.

    Importing the fla package pulls in transformers and takes 15 s or more; naive.py needs only
    torch and einops.
    """
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "ops" / op / "naive.py"
    module_spec = importlib.util.spec_from_file_location(f"fla_{op}_naive", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
