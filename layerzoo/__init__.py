"""layerzoo: pluggable token mixers behind one contract, composed by YAML specs into hybrid models."""

from .assemblies import CausalLM, build
from .errors import LayerzooError
from .mixers import Mixer, OptionError
from .mixers.attention import set_window
from .registry import get_mixer, list_mixers, register_mixer, unregister_mixer
from .specs import Spec, SpecError, load_spec, shipped_specs

__version__ = "0.1.0"

__all__ = [
    "CausalLM", "LayerzooError", "Mixer", "OptionError", "Spec", "SpecError", "build", "get_mixer",
    "list_mixers", "load_spec", "register_mixer", "set_window", "shipped_specs", "unregister_mixer",
]
