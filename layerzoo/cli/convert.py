"""`layerzoo convert HF_FOLDER|MODEL.gguf --pattern P --out DIR`: a pretrained transformer as a hybrid, its
attention layers replaced by other mixers initialised from their weights (layerzoo.convert)."""

from __future__ import annotations

import argparse

from ..errors import LayerzooError

PATTERNS = """\
patterns (which mixer each of the teacher's layers becomes):
  gated_deltanet*3,attention        names cycled over the layers: a 3:1 hybrid, attention last in each four
  gated_deltanet; attention@0,-1    every layer gated_deltanet, then attention at layers 0 and -1 (the last)
  swa                               every layer sliding-window attention (--set swa.window=512)
  hybrid.yaml                       a spec file's model: section: mixers (name: {type, options}) and pattern
                                    or layers; d_model, vocab_size and n_layers are the teacher's
targets: the registered mixers that declare how they start from an attention layer, your own
too (`layerzoo mixers --targets` lists them; attention is kept). Their head counts and widths come
from the teacher's attention, whose weights initialise them (docs/convert.md); other options keep
their defaults unless --set. The output folder holds the student, the teacher's tokenizer
and conversion.json."""


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="a pretrained Hugging Face transformer as a hybrid: attention layers replaced "
                                            "by other mixers initialised from their weights", epilog=PATTERNS,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("teacher", metavar="HF_FOLDER", help="a local folder of a Llama (SmolLM2), Mistral, Qwen2 or "
                        "Qwen3 causal LM (config.json, safetensors; its code is never run), a GGUF file of one "
                        "(MODEL.gguf, dequantized to fp32 once into the cache), or a layerzoo folder of attention layers")
    parser.add_argument("--pattern", required=True, help="a rule or a YAML spec file (below)")
    parser.add_argument("--set", dest="options", action="append", default=[], metavar="MIXER.OPTION=VALUE",
                        help="an option of a pattern's mixer, e.g. --set swa.window=512 (repeatable)")
    parser.add_argument("--out", required=True, help="the folder to write (new or empty)")
    parser.add_argument("--seed", type=int, default=0, help="seed of what the new mixers initialise themselves")


def run(args: argparse.Namespace) -> int:
    try:
        from ..convert import convert
        from ..convert.pattern import with_options
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    conversion = convert(args.teacher, with_options(args.pattern, args.options), args.out, seed=args.seed)
    layers = ", ".join(map(str, conversion.converted)) or "none"
    print(f"converted layers {layers} of {len(conversion.student.blocks)} into {args.out}; load it with "
          "`import layerzoo.hf` and AutoModelForCausalLM.from_pretrained")
    return 0
