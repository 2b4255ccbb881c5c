"""layerzoo: pluggable token mixers behind one contract, composed by YAML specs into hybrid models.

The package's layers, each importing only those before it: errors, options, registry, kernels,
blocks, mixers, specs, assemblies (causal LM, then ARMT, then `build`), tasks, training, testing,
hf, cli.
Importing `layerzoo` registers the built-in mixers and the `training:` spec section.
"""

from .errors import LayerzooError, OptionError, SpecError
from .options import option
from .registry import get_mixer, list_mixers, register_mixer, unregister_mixer
from .mixers import Mixer, MixerOptions, set_window
from .specs import Spec, load_spec, shipped_specs
from .assemblies import ARMT, CausalLM, build
from . import training  # noqa: F401  (registers the `training:` section)

__version__ = "0.1.0"

__all__ = [
    "ARMT", "CausalLM", "LayerzooError", "Mixer", "MixerOptions", "OptionError", "Spec", "SpecError", "__version__",
    "build", "get_mixer", "list_mixers", "load_spec", "option", "register_mixer", "set_window", "shipped_specs",
    "unregister_mixer",
]
