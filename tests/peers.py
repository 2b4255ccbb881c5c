"""Maintained libraries' own implementations, loaded for cross-checks (tests) and timings (benchmarks).

Imported as `peers`: pytest puts tests/ on sys.path, and the benchmarks that need it add it.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType


@functools.cache
def load_fla_naive() -> ModuleType | None:
    """flash-linear-attention's `ops/gated_delta_rule/naive.py` (naive_recurrent_ and
    naive_chunk_gated_delta_rule), loaded from its file alone, once; None when fla is not installed.

    Importing the fla package pulls in transformers and takes 15 s or more; naive.py needs only
    torch and einops.
    """
    spec = importlib.util.find_spec("fla")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent / "ops" / "gated_delta_rule" / "naive.py"
    module_spec = importlib.util.spec_from_file_location("fla_gated_delta_rule_naive", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module
