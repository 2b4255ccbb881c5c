"""Assemblies: models made of mixers. The causal LM, ARMT around a causal LM, and `build` above both."""

from .armt import ARMT, wrap
from .build import build
from .causal_lm import CausalLM
from .generate import generate

__all__ = ["ARMT", "CausalLM", "build", "generate", "wrap"]
