"""Training on documents of different lengths: packed rows (cu_seqlens) against padding to the longest.

    python -m benchmarks varlen_training                   # swax-tiny and a wider swax, rows of 1024
    python -m benchmarks varlen_training --row 2048 --docs 24

Document lengths are log-normal with a median of 1/8 of the row (sigma 1), cut to the row, the
same documents for every method. One cell is one training step (forward, backward, AdamW) over
all of them:
- packed: the documents one after another in one packed row (1, total) with cu_seqlens;
- padded: one row per document (docs, longest), padded on the right, no mask (right padding
  never reaches a real token of a causal model), the padding computed and its loss ignored;
- masked: the padded batch with its attention_mask, which layerzoo packs internally.
tokens/s counts real tokens only.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

import layerzoo

from .runner.arguments import positive_int
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table, ratio
from .runner.timing import Cell, time_cells
from .runner.training_step import training_step

MODELS = {
    "swax-tiny": [],
    "swax-small": ["model.d_model=256", "model.n_layers=6", "model.mixers.swa.window=128",
                   "model.mixers.swa.n_heads=4", "model.mixers.mlstm.n_heads=4", "model.mixers.mlstm.chunk_size=64"],
}
METHODS = ("packed", "padded", "masked")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS),
                        help="swax-tiny, and swax-small: swax-tiny at d_model 256, 6 layers, window 128")
    parser.add_argument("--row", type=positive_int, default=1024, help="the row length the document lengths scale with")
    parser.add_argument("--docs", type=positive_int, default=24, help="documents per step")
    parser.set_defaults(reps=5, budget=20.0)


def document_lengths(count: int, row: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.exp(torch.randn(count, generator=generator) + torch.log(torch.tensor(row / 8)))
    return lengths.round().clamp(2, row).long().tolist()


def packed_row(documents: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids (1, total), targets, cu_seqlens): the documents one after another in one packed row,
    as fixed-length training rows hold them when a document may continue into the next row."""
    ids = torch.cat(documents)[None]
    targets = torch.cat([F.pad(document[1:], (0, 1), value=-100) for document in documents])[None]
    cu_seqlens = F.pad(torch.tensor([len(document) for document in documents]).cumsum(0), (1, 0))
    return ids, targets, cu_seqlens


def padded_batch(documents: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids (N, longest), targets, attention_mask), padded on the right."""
    longest = max(map(len, documents))
    ids = torch.zeros(len(documents), longest, dtype=torch.long)
    targets = torch.full_like(ids, -100)
    mask = torch.zeros_like(ids)
    for index, document in enumerate(documents):
        ids[index, :len(document)] = document
        targets[index, :len(document) - 1] = document[1:]
        mask[index, :len(document)] = 1
    return ids, targets, mask


def run(args: argparse.Namespace) -> dict:
    lengths = document_lengths(args.docs, args.row, seed=0)
    generator = torch.Generator().manual_seed(1)
    cells, shapes = [], {}
    for name in args.models:
        torch.manual_seed(0)
        model = layerzoo.build("swax-tiny", MODELS[name])
        documents = [torch.randint(model.config.vocab_size, (length,), generator=generator) for length in lengths]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids, targets, cu_seqlens = packed_row(documents)
        padded_ids, padded_targets, mask = padded_batch(documents)
        steps = {"packed": (ids, targets, {"cu_seqlens": cu_seqlens}), "padded": (padded_ids, padded_targets, {}),
                 "masked": (padded_ids, padded_targets, {"attention_mask": mask})}
        cells += [Cell({"model": name, "method": method}, lambda step=step: training_step(model, optimizer, step[0],
                                                                                            step[1], **step[2]))
                  for method, step in steps.items()]
        shapes[name] = {"packed": list(ids.shape), "padded": list(padded_ids.shape)}
    return {"rows": time_cells(cells, rounds=args.reps, budget=args.budget), "lengths": lengths, "shapes": shapes}


def render(data: dict) -> str:
    config, rows, real = data["config"], data["rows"], sum(data["lengths"])
    table = []
    for name in config["models"]:
        speed = {method: real / value(rows, "seconds", model=name, method=method) for method in METHODS}
        shapes = data["shapes"][name]
        table.append([name, " x ".join(map(str, shapes["packed"])), " x ".join(map(str, shapes["padded"])),
                      *(f"{speed[method]:,.0f}" for method in METHODS), ratio(speed["packed"], speed["padded"], 2)])
    caption = (f"{config['docs']} documents, {real} real tokens, lengths log-normal (median {config['row'] // 8}, the "
               f"longest {max(data['lengths'])}); best of {config['reps']} interleaved rounds")
    head = ["model", "packed row", "padded batch", "packed tok/s", "padded tok/s", "masked tok/s", "packed / padded"]
    return f"{caption}\n\n{markdown_table(head, table)}"


BENCHMARK = Benchmark(
    name="varlen_training", description="Training steps on documents of different lengths: packed rows against padding",
    add_arguments=add_arguments, run=run, render=render,
    smoke={"models": ["swax-tiny"], "row": 64, "docs": 4},
)
