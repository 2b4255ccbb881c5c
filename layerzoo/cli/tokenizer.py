"""`layerzoo tokenizer train FILES...`: a byte-level BPE trained on local text, as a tokenizer folder."""

from __future__ import annotations

import argparse


def add_parser(commands, name: str) -> None:
    parser = commands.add_parser(name, help="train a byte-level BPE tokenizer on local text")
    actions = parser.add_subparsers(dest="action", required=True)
    training = actions.add_parser("train", help="train a byte-level BPE on files and write a tokenizer folder")
    training.add_argument("files", nargs="+", help="text, .jsonl or .parquet files, globs, or stdlib:GLOB")
    training.add_argument("--vocab-size", type=int, required=True, help="tokens: 256 bytes, EOS and merges (>= 257)")
    training.add_argument("--out", required=True, help="folder to write tokenizer.json and tokenizer_config.json to")
    training.add_argument("--field", default="text", help="the text field of .jsonl records / column of .parquet files")


def run(args: argparse.Namespace) -> int:
    from ..tasks.text import documents, resolve_files, train_bpe

    files = resolve_files(tuple(args.files))
    out = train_bpe(documents(files, args.field), args.vocab_size, args.out, progress=True)
    print(f"wrote {out / 'tokenizer.json'} ({args.vocab_size} tokens, from {len(files)} files)")
    return 0
