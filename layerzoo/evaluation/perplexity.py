"""Loss, perplexity and bits per byte against context length, on held-out documents streamed
through the model a piece at a time with the mixers' states carried from piece to piece.

Memory is that of one piece plus the state: constant in the context length for SWA, mLSTM,
Gated DeltaNet and ARMT layers, whose states have a fixed size; full attention's KV cache grows
with the context, as it must (its keys and values are the state).
"""

from __future__ import annotations

import contextlib
import math

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from ..mixers import at_window
from ..tasks import Text
from ..training.objectives.batches import uncompiled
from .progress import Progress

LOG2 = math.log(2)


@torch.no_grad()
@uncompiled
def perplexity_by_length(model: nn.Module, task: Text, lengths: list[int], *, samples: int = 8, chunk_size: int = 1024,
                         window: int | None = None, seed: int = 0, device: torch.device | str = "cpu",
                         autocast=contextlib.nullcontext(), label: str = "perplexity", progress: bool = False) -> dict:
    """For each context length L: the mean loss (nats per token), perplexity and bits per byte of
    the first L predictions of up to `samples` documents of `task`'s split that have L + 1 tokens
    (a seeded choice; each document from its start, its first token EOS), and each document's own
    mean loss (`document_losses`, their spread). Per position bucket
    (position 0, then positions [2^(k-1), 2^k) for k >= 1, so L = 2^n ends a bucket): the same measures over
    the documents of the longest length that has any, so every bucket averages the same documents.

    Each document runs once, to the longest length it counts for, in pieces of chunk_size tokens.
    `progress`: a bar of the tokens run (stderr, named `label`) and the whole's time after the first piece.
    """
    was_training = model.training
    model.eval()
    lengths = sorted(set(lengths))
    doc_ids = task.doc_ids
    sizes = task.shards.documents[doc_ids, 2]
    order = np.random.default_rng(seed).permutation(len(doc_ids))
    chosen = {length: [int(doc_ids[i]) for i in order if sizes[i] >= length + 1][:samples] for length in lengths}
    covered = [length for length in lengths if chosen[length]]
    longest = covered[-1] if covered else None
    reach: dict[int, int] = {}
    for length in covered:
        for doc in chosen[length]:
            reach[doc] = max(reach.get(doc, 0), length)
    token_bytes = torch.from_numpy(task.tokenizer_model.token_bytes)
    totals = {length: np.zeros(2) for length in lengths}  # loss sum, bytes
    per_document = {length: dict.fromkeys(chosen[length], 0.0) for length in lengths}  # loss sums
    buckets = np.zeros(((longest or 1).bit_length() + 1, 3))  # loss sum, bytes, tokens
    with at_window(model, window), Progress(sum(reach.values()), label, "perplexity", enabled=progress) as bar:
        for doc, stop in reach.items():
            tokens = torch.from_numpy(task.shards.document(doc)[:stop + 1])
            for start, losses, targets in stream_losses(model, tokens, chunk_size, device, autocast):
                nbytes = token_bytes[targets].double()
                for length in lengths:
                    if doc in chosen[length] and start < length:
                        loss_sum = float(losses[:length - start].sum())
                        totals[length] += (loss_sum, float(nbytes[:length - start].sum()))
                        per_document[length][doc] += loss_sum
                if doc in chosen.get(longest, ()):
                    bucket = position_buckets(np.arange(start, start + len(losses)))
                    np.add.at(buckets, bucket, np.stack([losses.numpy(), nbytes.numpy(), np.ones(len(losses))], 1))
                bar.advance(len(losses))
    model.train(was_training)
    rows = [{**measures(totals[length][0], totals[length][1], length * len(chosen[length]),
                        length=length, documents=len(chosen[length])),
             "document_losses": [per_document[length][doc] / length for doc in chosen[length]]}
            for length in lengths]
    bucket_rows = [measures(loss, nbytes, int(count), first=2**k // 2, last=min(2**k, longest) - 1)
                   for k, (loss, nbytes, count) in enumerate(buckets) if count]
    return {"lengths": rows, "buckets": bucket_rows, "bucket_length": longest,
            "bucket_documents": len(chosen[longest]) if longest else 0, "window": window, "chunk_size": chunk_size}


def position_buckets(positions: np.ndarray) -> np.ndarray:
    """(N,) positions -> their buckets: 0 for position 0, k for [2^(k-1), 2^k)."""
    return np.where(positions > 0, np.floor(np.log2(np.maximum(positions, 1))).astype(np.int64) + 1, 0)


def stream_losses(model: nn.Module, tokens: torch.Tensor, chunk_size: int, device, autocast):
    """Yield (start, losses (n,) float64 on CPU, targets (n,)) for the pieces of one document
    tokens (T,): each piece's next-token losses, the state carried from the piece before."""
    state = None
    for start in range(0, len(tokens) - 1, chunk_size):
        targets = tokens[start + 1:start + chunk_size + 1]
        piece = tokens[start:start + len(targets)]
        with autocast:
            logits, state = model(piece[None].to(device), state=state, return_state=True)
        losses = F.cross_entropy(logits[0].float(), targets.to(device), reduction="none")
        yield start, losses.double().cpu(), targets


def measures(loss_sum: float, byte_count: float, tokens: int, **where) -> dict:
    """{**where, tokens, loss (nats per token), perplexity, bits_per_byte}; None where nothing was scored."""
    if not tokens:
        return {**where, "tokens": 0, "loss": None, "perplexity": None, "bits_per_byte": None}
    loss = loss_sum / tokens
    return {**where, "tokens": tokens, "loss": loss, "perplexity": math.exp(min(loss, 700.0)),
            "bits_per_byte": loss_sum / LOG2 / byte_count if byte_count else None}


def format_perplexity(result: dict) -> str:
    """A table: one row per context length, then one per position bucket."""
    head = ("context", "documents", "loss (nats/token)", "perplexity", "bits/byte")
    rows = [(str(row["length"]), str(row["documents"]), *cells(row)) for row in result["lengths"]]
    rows += [(f"positions {row['first']}-{row['last']}", str(result["bucket_documents"]), *cells(row))
             for row in result["buckets"]]
    widths = [max(len(row[i]) for row in [head, *rows]) for i in range(len(head))]
    return "\n".join("  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in [head, *rows])


def cells(row: dict) -> tuple[str, str, str]:
    if row["loss"] is None:
        return "-", "-", "-"
    bpb = "-" if row["bits_per_byte"] is None else f"{row['bits_per_byte']:.3f}"
    return f"{row['loss']:.3f}", f"{row['perplexity']:.2f}", bpb
