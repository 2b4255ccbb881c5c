"""YAML layer-pattern specs: reading, validating and resolving them into a ModelConfig.

Sections are dataclasses whose fields carry their defaults, types and bounds (fields.py); the
layers above specs register the sections they own (sections.py).
"""

from ..errors import SpecError
from ..options import Section, option
from .armt import ARMTConfig
from .config import LayerConfig, MixerConfig, ModelConfig
from .fields import read_section
from .files import shipped_specs
from .sections import register_section
from .spec import Spec, load_spec

__all__ = [
    "ARMTConfig", "LayerConfig", "MixerConfig", "ModelConfig", "Section", "Spec", "SpecError", "load_spec",
    "option", "read_section", "register_section", "shipped_specs",
]
