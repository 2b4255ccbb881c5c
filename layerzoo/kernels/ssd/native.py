"""SSD's compiled CPU forward (cpu_forward.cpp), built on first use (see native_forward.py)."""

from __future__ import annotations

from ..common.native_forward import compiled_forward

COMPILED = compiled_forward("ssd", "SSD forward")
