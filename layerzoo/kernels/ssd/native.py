"""SSD's compiled CPU forward (cpu_forward.cpp), built on first use (see common/matrix_state.py)."""

from __future__ import annotations

from ..common.matrix_state import compiled_forward

COMPILED = compiled_forward("ssd", "SSD forward")
