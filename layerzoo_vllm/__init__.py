"""vLLM's entry point for layerzoo (the `vllm.general_plugins` group): `register` names layerzoo's
model class and config class to vLLM by string only.

vLLM imports this module in every process it starts, also where layerzoo's extras are missing,
so it imports nothing of layerzoo, torch or transformers: they load when vLLM first meets a
layerzoo folder (config.json's `model_type: layerzoo`, `architectures: [LayerzooForCausalLM]`).
"""

ARCHITECTURE = "LayerzooForCausalLM"
MODEL_CLASS = "layerzoo.hf.serving.model:LayerzooForVLLM"
MODEL_TYPE, CONFIG_CLASS, CONFIG_MODULE = "layerzoo", "LayerzooConfig", "layerzoo.hf.config"


def register() -> None:
    """Register layerzoo's architecture and config with vLLM, lazily (vLLM calls this)."""
    from vllm import ModelRegistry
    from vllm.transformers_utils import config, configs

    ModelRegistry.register_model(ARCHITECTURE, MODEL_CLASS)
    # vLLM's own lazy table of config classes: the class is imported when a folder names its model_type
    configs._CLASS_TO_MODULE.setdefault(CONFIG_CLASS, CONFIG_MODULE)
    config._CONFIG_REGISTRY.setdefault(MODEL_TYPE, CONFIG_CLASS)
