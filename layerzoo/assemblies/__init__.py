"""Assemblies: models made of mixers. The causal LM, ARMT around a causal LM, and `build` above both."""

from .armt import ARMT, wrap
from .build import build
from .summary import describe
from .causal_lm import CausalLM
from .generate import generate
from .init import init_weights

__all__ = ["ARMT", "CausalLM", "build", "describe", "generate", "init_weights", "wrap"]
