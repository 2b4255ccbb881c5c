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
their code) and layerzoo folders of attention layers. docs/convert.md has the mappings.
"""

from .conversion import Conversion, convert
from .distill import distill_folder
from .errors import ConvertError
from .pattern import TARGETS

__all__ = ["Conversion", "ConvertError", "TARGETS", "convert", "distill_folder"]
