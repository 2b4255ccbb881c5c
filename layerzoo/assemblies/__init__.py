"""Assemblies: specs turned into models."""

from .causal_lm import CausalLM, build
from .generate import generate

__all__ = ["CausalLM", "build", "generate"]
