"""The text pipeline's cost: tokenization throughput on the standard library's sources, and the
data pipeline's share of a training step.

    python benchmarks/text_data.py                          # the stdlib corpus, bytes and a BPE of 1024 tokens
    python benchmarks/text_data.py --files 'stdlib:*.py' --reps 5 --json text.json

Tokenization: MB of UTF-8 text per second, (a) the tokenizer's batch encoder alone on texts in
memory, (b) building the token shards: reading the files, encoding, writing the shards and the
index (a fresh cache folder each round). The BPE is trained once on the same files, untimed.
Data share: one training step of swax-tiny's model (and swax-text-tiny's) on windows of the
corpus: drawing the step's batch (windows, document boundaries, cu_seqlens) against the whole
step (that batch, forward, backward, AdamW). Cells interleaved, best of --reps rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import layerzoo  # noqa: E402
from layerzoo.tasks import example_seed, make_task  # noqa: E402
from layerzoo.tasks.text import documents, load_tokenizer, resolve_files, train_bpe  # noqa: E402
from layerzoo.tasks.text.shards import write_shards  # noqa: E402

from common import interleaved_best_seconds, markdown_table  # noqa: E402

MODELS = {"swax-tiny": ("swax-tiny", ["model.vocab_size=257"]), "swax-text-tiny": ("swax-text-tiny", [])}


def tokenization_cells(files: list[Path], tokenizers: dict, scratch: Path) -> dict:
    texts = list(documents(files, "text"))

    def encode(tokenizer):
        return lambda: tokenizer.encode_batch(texts)

    def build(name, tokenizer):
        def run():
            folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
            write_shards(folder, files, "text", tokenizer, progress=False, shard_tokens=1 << 28)
        return run

    cells = {}
    for name, tokenizer in tokenizers.items():
        cells[name, "encode"] = encode(tokenizer)
        cells[name, "build"] = build(name, tokenizer)
    return cells


def step_cells(pattern: str, seq_len: int, batch_size: int) -> dict:
    cells = {}
    for label, (spec, overrides) in MODELS.items():
        torch.manual_seed(0)
        model = layerzoo.build(spec, overrides)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        task = make_task("text", {"files": [pattern]}, model.config.vocab_size)
        task.prepare(progress=False)
        counter = iter(range(10**9))

        def data(task=task, counter=counter):
            step = next(counter)
            return task.batch(seq_len, [example_seed(0, "train", step, index) for index in range(batch_size)])

        def step(model=model, optimizer=optimizer, data=data):
            batch = data()
            logits = model(batch.input_ids.reshape(1, -1), cu_seqlens=batch.cu_seqlens)
            loss = F.cross_entropy(logits[0].float(), batch.targets.flatten())
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)

        cells[label, "data"], cells[label, "step"] = data, step
    return cells


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", default="stdlib:**/*.py", help="the corpus (default: swax-text-tiny's, the standard library)")
    parser.add_argument("--vocab-size", type=int, default=1024, help="the BPE's tokens")
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--budget", type=float, default=60.0, help="seconds of runs per cell before it stops repeating")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    files = resolve_files((args.files,))
    megabytes = sum(len(text.encode()) for text in documents(files, "text")) / 1e6
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["LAYERZOO_CACHE"] = str(Path(scratch) / "cache")  # the step cells' shards, not ~/.cache
        bpe = load_tokenizer(str(train_bpe(documents(files, "text"), args.vocab_size, Path(scratch) / "bpe")))
        tokenizers = {"bytes": load_tokenizer("bytes"), f"BPE {args.vocab_size}": bpe}
        cells = {**tokenization_cells(files, tokenizers, Path(scratch)), **step_cells(args.files, args.seq_len, args.batch_size)}
        best = interleaved_best_seconds(cells, args.reps, args.budget, "cpu")

    print(f"{args.files}: {len(files)} files, {megabytes:.1f} MB of UTF-8; best of {args.reps} interleaved rounds, "
          f"{torch.get_num_threads()} threads")
    print(markdown_table(["tokenizer", "encode_batch MB/s", "shard build MB/s"],
                         [[name, f"{megabytes / best[name, 'encode']:.1f}", f"{megabytes / best[name, 'build']:.1f}"]
                          for name in tokenizers]))
    print()
    tokens = args.seq_len * args.batch_size
    rows = [[label, f"{args.batch_size} x {args.seq_len}", f"{1e3 * best[label, 'data']:.2f}", f"{1e3 * best[label, 'step']:.1f}",
             f"{100 * best[label, 'data'] / best[label, 'step']:.2f}%", f"{tokens / best[label, 'step']:,.0f}"]
            for label in MODELS]
    print(markdown_table(["model", "batch", "data ms", "step ms", "data share", "tokens/s"], rows))
    if args.json:
        args.json.write_text(json.dumps({"files": args.files, "megabytes": megabytes,
                                         "seconds": {" / ".join(key): value for key, value in best.items()}}, indent=2))


if __name__ == "__main__":
    main()
