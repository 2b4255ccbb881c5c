"""YAML layer-pattern specs: reading, validating and resolving them into a ModelConfig."""

from .config import LayerConfig, MixerConfig, ModelConfig
from .resolve import shipped_specs
from .spec import Spec, load_spec
from .yaml_source import SpecError

__all__ = ["LayerConfig", "MixerConfig", "ModelConfig", "Spec", "SpecError", "load_spec", "shipped_specs"]
