"""The text pipeline's cost: tokenization throughput on the standard library's sources, and the
data pipeline's share of a training step.

    python -m benchmarks text_data                        # the stdlib corpus, bytes and BPEs of 1024 and 32768 tokens
    python -m benchmarks text_data --files 'stdlib:json/*.py' --vocab-size 1024 --reps 5

Tokenization: MB of UTF-8 text per second, (a) the tokenizer's batch encoder alone on texts in
memory (HFTokenizer.encode_batch: token ids as numpy arrays), (b) for a BPE, the tokenizers
library called directly on the same texts, its batch encoder at its fastest (encode_batch_fast,
the Encoding objects left unread), on all its threads and, for the first BPE, on one
(TOKENIZERS_PARALLELISM=false), (c) building the token shards: reading the files, encoding,
writing the shards and the index (a fresh folder each round). Each BPE is trained once on the same
files, untimed. Data
share: one training step of swax-tiny's model (on bytes, vocab 257) and of swax-text-tiny's on
windows of the corpus, batch_size x seq_len tokens: drawing the step's batch (windows, document
boundaries, cu_seqlens) against the whole step (that batch, forward, backward, AdamW). All cells
in one set of interleaved rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from unittest import mock

import torch

import layerzoo
from layerzoo.tasks import example_seed, make_task
from layerzoo.tasks.text import documents, load_tokenizer, resolve_files, train_bpe
from layerzoo.tasks.text.shards import write_shards

from .runner.arguments import positive_int
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table
from .runner.timing import Cell, time_cells
from .runner.training_step import training_step

MODELS = {"swax-tiny": ("swax-tiny", ["model.vocab_size=257"]), "swax-text-tiny": ("swax-text-tiny", [])}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--files", default="stdlib:**/*.py", help="the corpus (default: swax-text-tiny's, the standard library)")
    parser.add_argument("--vocab-size", type=positive_int, nargs="+", default=[1024, 32768],
                        help="each BPE's tokens (>= 257): a small one, and one of GPT-2's order for reference")
    parser.add_argument("--seq-len", type=positive_int, default=256)
    parser.add_argument("--batch-size", type=positive_int, default=16)
    parser.set_defaults(reps=3, budget=60.0)


def unavailable(args: argparse.Namespace) -> str | None:
    return None if importlib.util.find_spec("tokenizers") else "needs the tokenizers package (pip install 'layerzoo[text]')"


def serial(call: Callable[[], object]) -> Callable[[], object]:
    """call, run with the tokenizers library's parallelism off (it reads the variable at each call)."""
    def run():
        with mock.patch.dict(os.environ, {"TOKENIZERS_PARALLELISM": "false"}):
            return call()
    return run


def encoder_threads() -> int:
    """The threads the tokenizers library encodes a batch on: RAYON_NUM_THREADS, else the CPUs
    this process may run on (rayon's default); 1 where TOKENIZERS_PARALLELISM turns it off."""
    if os.environ.get("TOKENIZERS_PARALLELISM", "").lower() in ("0", "false", "off", "no"):
        return 1
    return int(os.environ.get("RAYON_NUM_THREADS") or 0) or len(os.sched_getaffinity(0))


def tokenization_cells(files: list[Path], tokenizers: dict, scratch: Path) -> list[Cell]:
    """encode and build for each tokenizer; for each BPE, its library directly (what="library"),
    and for the first BPE on one thread too (what="library, 1 thread")."""
    texts = list(documents(files, "text"))

    def encode(tokenizer):
        return lambda: tokenizer.encode_batch(texts)

    def library(tokenizer):
        return lambda: tokenizer.tokenizer.encode_batch_fast(texts, add_special_tokens=False)

    def build(name, tokenizer):
        def run():
            folder = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=scratch))
            write_shards(folder, files, "text", tokenizer, progress=False, shard_tokens=1 << 28)
        return run

    cells = []
    for name, tokenizer in tokenizers.items():
        cells.append(Cell({"tokenizer": name, "what": "encode"}, encode(tokenizer)))
        if hasattr(tokenizer, "tokenizer"):  # a BPE: the library's own rate beside ours
            cells.append(Cell({"tokenizer": name, "what": "library"}, library(tokenizer)))
            if not any(cell.labels["what"] == "library, 1 thread" for cell in cells):
                cells.append(Cell({"tokenizer": name, "what": "library, 1 thread"}, serial(library(tokenizer))))
        cells.append(Cell({"tokenizer": name, "what": "build"}, build(name, tokenizer)))
    return cells


def step_cells(pattern: str, seq_len: int, batch_size: int) -> list[Cell]:
    cells = []
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
            training_step(model, optimizer, batch.input_ids.reshape(1, -1), batch.targets.reshape(1, -1),
                          cu_seqlens=batch.cu_seqlens)

        cells += [Cell({"model": label, "what": "data"}, data), Cell({"model": label, "what": "step"}, step)]
    return cells


def run(args: argparse.Namespace) -> dict:
    files = resolve_files((args.files,))
    megabytes = sum(len(text.encode()) for text in documents(files, "text")) / 1e6
    with tempfile.TemporaryDirectory() as scratch, \
            mock.patch.dict(os.environ, {"LAYERZOO_CACHE": str(Path(scratch) / "cache")}):  # the shards, not ~/.cache
        tokenizers = {"bytes": load_tokenizer("bytes")}
        for size in args.vocab_size:
            tokenizers[f"BPE {size}"] = load_tokenizer(str(train_bpe(documents(files, "text"), size,
                                                                     Path(scratch) / f"bpe-{size}")))
        cells = tokenization_cells(files, tokenizers, Path(scratch)) + step_cells(args.files, args.seq_len,
                                                                                  args.batch_size)
        rows = time_cells(cells, rounds=args.reps, budget=args.budget)
    return {"rows": rows, "files": len(files), "megabytes": megabytes, "tokenizers": list(tokenizers),
            "encoder_threads": encoder_threads()}


def render(data: dict) -> str:
    config, rows, megabytes = data["config"], data["rows"], data["megabytes"]
    threads = data.get("encoder_threads")
    caption = (f"{config['files']}: {data['files']} files, {megabytes:.1f} MB of UTF-8; best of {config['reps']} "
               "interleaved rounds" + (f"; the tokenizers library on {threads} threads" if threads else ""))

    def rate(name, what):
        seconds = value(rows, "seconds", tokenizer=name, what=what)
        return "–" if seconds is None else f"{megabytes / seconds:.1f}"

    whats = {"encode": "encode_batch MB/s", "library": "tokenizers directly MB/s",
             "library, 1 thread": "directly, 1 thread MB/s", "build": "shard build MB/s"}
    whats = {what: header for what, header in whats.items() if any(row["cell"].get("what") == what for row in rows)}
    tokenization = markdown_table(["tokenizer", *whats.values()],
                                  [[name, *(rate(name, what) for what in whats)] for name in data["tokenizers"]])
    tokens = config["seq_len"] * config["batch_size"]
    steps = []
    for label in MODELS:
        data_s, step_s = (value(rows, "seconds", model=label, what=what) for what in ("data", "step"))
        steps.append([label, f"{config['batch_size']} x {config['seq_len']}", f"{data_s * 1e3:.2f}", f"{step_s * 1e3:.1f}",
                      f"{data_s / step_s:.2%}", f"{tokens / step_s:,.0f}"])
    share = markdown_table(["model", "batch", "data ms", "step ms", "data share", "tokens/s"], steps)
    return f"{caption}\n\n{tokenization}\n\n{share}"


BENCHMARK = Benchmark(
    name="text_data", description="Tokenization throughput and the data pipeline's share of a training step",
    add_arguments=add_arguments, run=run, render=render, unavailable=unavailable, packages=("tokenizers",),
    smoke={"files": "stdlib:json/*.py", "vocab_size": [300], "seq_len": 32, "batch_size": 2},
)
