"""ARMT: segment-recurrent associative memory, built from a spec or wrapped around a causal LM.

    model = layerzoo.build("armt-tiny")                                  # from a spec
    model = wrap("path/to/smollm2", segment_size=256, num_mem_tokens=32, memory_layers=[15, 31])
    loss = model(input_ids, labels=input_ids); loss.backward()           # any length
    out = model.generate(prompt, 64)
    save_adapter(model, "armt.safetensors"); model = load_adapter("path/to/smollm2", "armt.safetensors")
"""

from .adapter import load_adapter, save_adapter
from .backbones import HF_LAYER_PATHS, find_decoder_layers
from .model import ARMT, ARMTState, ARMTStreams
from .wrap import load_hf_checkpoint, wrap

__all__ = [
    "ARMT", "ARMTState", "ARMTStreams", "HF_LAYER_PATHS", "find_decoder_layers", "load_adapter",
    "load_hf_checkpoint", "save_adapter", "wrap",
]
