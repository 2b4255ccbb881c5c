"""Assemblies: specs turned into models."""

from .causal_lm import CausalLM, build
from .generate import generate
from .armt import ARMT, wrap  # noqa: F401

__all__ = ["CausalLM", "build", "generate"]
