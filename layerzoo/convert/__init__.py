"""Convert a pretrained transformer into a hybrid: `layerzoo convert HF_FOLDER --pattern ... --out DIR`.

    from layerzoo.convert import convert, Conversion, ConvertError
    conversion = convert("smollm2-135m", "gated_deltanet*3,attention")
    conversion.teacher      # CausalLM: the folder's model in layerzoo, every layer attention
    conversion.student      # CausalLM: the pattern's model, new mixers initialised from attention
    conversion.converted    # indices of the layers whose mixer changed
    conversion.save("out")  # a layerzoo Hugging Face folder, the teacher's tokenizer, conversion.json
    Conversion.load("out")  # the student from it, the teacher from its folder again
    distill_folder("out", "runs/distilled", "distill.yaml")  # `layerzoo distill`: distilled, as a folder

Teachers: Llama (SmolLM2), Mistral, Qwen2, Qwen3 folders (config.json and safetensors, never
their code) and layerzoo folders of attention layers. docs/convert.md has the mappings. Targets:
the registered mixers that declare how they start from attention (`list_targets()`).
"""

from typing import Any

from ..registry import list_targets
from .conversion import Conversion, convert
from .distill import distill_folder
from .errors import ConvertError


def __getattr__(name: str) -> Any:
    if name == "TARGETS":  # no fixed tuple can list the targets: a user's registered mixer can be one
        raise AttributeError("layerzoo.convert.TARGETS is now layerzoo.convert.list_targets(), read from the registry")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Conversion", "ConvertError", "convert", "distill_folder", "list_targets"]
