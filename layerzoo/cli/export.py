"""`layerzoo export RUN OUT_DIR`: a run's newest checkpoint (and tokenizer) as a transformers folder."""

from __future__ import annotations

import argparse

from ..errors import LayerzooError


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="a run's newest checkpoint (and tokenizer) as a transformers folder")
    parser.add_argument("run", help="a run folder (its newest usable checkpoint) or a checkpoint folder")
    parser.add_argument("out_dir", help="the folder to write (new or empty): config.json, model.safetensors, tokenizer")


def run(args: argparse.Namespace) -> int:
    try:
        from ..hf.export import export_run
    except ImportError as error:  # transformers is an extra; its absence is one line too
        raise LayerzooError(str(error)) from None
    checkpoint = export_run(args.run, args.out_dir)
    print(f"exported {checkpoint} to {args.out_dir}; load it with `import layerzoo.hf` and "
          "AutoModelForCausalLM.from_pretrained")
    return 0
