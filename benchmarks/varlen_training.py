"""Training on documents of different lengths: packed rows (cu_seqlens) against padding to the longest.

    python benchmarks/varlen_training.py                       # swax-tiny and a wider swax, rows of 1024
    python benchmarks/varlen_training.py --row 2048 --docs 24 --json varlen.json

Document lengths are log-normal with a median of 1/8 of the row (sigma 1), cut to the row, the
same documents for every method. One training step (forward, backward, AdamW) over all of them:
- packed: the documents one after another in one packed row with cu_seqlens;
- padded: one row per document, padded on the right to the longest, no mask (right padding never
  reaches a real token of a causal model), the padding computed and its loss ignored;
- masked: the padded batch with its attention_mask, which layerzoo packs internally.
tokens/s counts real tokens only. Cells are interleaved, best of --reps rounds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import layerzoo  # noqa: E402

from common import interleaved_best_seconds, markdown_table  # noqa: E402

MODELS = {
    "swax-tiny": [],
    "swax-small": ["model.d_model=256", "model.n_layers=6", "model.mixers.swa.window=128",
                   "model.mixers.swa.n_heads=4", "model.mixers.mlstm.n_heads=4", "model.mixers.mlstm.chunk_size=64"],
}
METHODS = ("packed", "padded", "masked")


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


def step_fn(model, optimizer, ids, targets, **kwargs):
    def step():
        logits = model(ids, **kwargs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--row", type=int, default=1024, help="the row length the document lengths scale with")
    parser.add_argument("--docs", type=int, default=24, help="documents per step")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--budget", type=float, default=20.0, help="seconds of runs per cell before it stops repeating")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    lengths = document_lengths(args.docs, args.row, seed=0)
    generator = torch.Generator().manual_seed(1)
    cells, shapes, real = {}, {}, sum(lengths)
    for name in args.models:
        torch.manual_seed(0)
        model = layerzoo.build("swax-tiny", MODELS[name])
        documents = [torch.randint(model.config.vocab_size, (length,), generator=generator) for length in lengths]
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        ids, targets, cu_seqlens = packed_row(documents)
        cells[name, "packed"] = step_fn(model, optimizer, ids, targets, cu_seqlens=cu_seqlens)
        padded_ids, padded_targets, mask = padded_batch(documents)
        cells[name, "padded"] = step_fn(model, optimizer, padded_ids, padded_targets)
        cells[name, "masked"] = step_fn(model, optimizer, padded_ids, padded_targets, attention_mask=mask)
        shapes[name] = {"packed": f"1 x {ids.shape[1]}", "padded": "{} x {}".format(*padded_ids.shape)}
    best = interleaved_best_seconds(cells, args.reps, args.budget, "cpu")

    rows, records = [], []
    for name in args.models:
        speed = {method: real / best[name, method] for method in METHODS}
        rows.append([name, shapes[name]["packed"], shapes[name]["padded"],
                     *(f"{speed[method]:,.0f}" for method in METHODS),
                     f"{speed['packed'] / speed['padded']:.2f}x"])
        records.append({"model": name, "real_tokens": real, "seconds": {m: best[name, m] for m in METHODS}})
    print(f"{args.docs} documents, {real} real tokens, lengths log-normal (median {args.row // 8}): "
          f"{sorted(lengths)}")
    print(markdown_table(["model", "packed row", "padded batch", "packed tok/s", "padded tok/s",
                          "masked tok/s", "packed / padded"], rows))
    if args.json:
        args.json.write_text(json.dumps({"lengths": lengths, "row": args.row, "results": records}, indent=2))


if __name__ == "__main__":
    main()
