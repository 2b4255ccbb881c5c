"""Language modelling on local text: windows of a corpus's token stream, documents kept apart."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from ...options import option
from ..base import Batch, Task, randint, require
from .cache import built, cache_root, content_key, file_hash
from .corpus import documents
from .discovery import resolve_files
from .shards import Shards, token_shards
from .tokenizer import ByteTokenizer, HFTokenizer, load_tokenizer, train_bpe

BPE = "bpe:"


@dataclass(frozen=True)
class Text(Task):
    """Next-token prediction on `files` (paths, globs, `stdlib:GLOB`; .jsonl and .parquet read
    `field`), tokenized once into cached token shards (shards.py).

    tokenizer: `bytes` (UTF-8 bytes and EOS, 257 tokens), a Hugging Face tokenizer folder, or
    `bpe:N`, a byte-level BPE of N tokens trained on this task's training documents (cached too).
    A seeded `holdout` fraction of the documents (at least one) is the "eval" split. A row is a
    window of seq_len + 1 tokens at a seeded random place in the split's documents, one after
    another, each beginning with EOS; with `pack` (the default) the row's documents are packed
    sequences (Batch.cu_seqlens), so no attention or state crosses from one into the next, in
    training and evaluation alike.
    """

    name = "text"
    files: tuple[str, ...] = option((), help="paths, globs or stdlib:GLOB (.txt, .py, .jsonl, .parquet, ...)")
    field: str = option("text", help="the field holding the text in .jsonl and .parquet files")
    tokenizer: str = option("bytes", help="bytes, bpe:N (trained on the training documents) or a tokenizer folder")
    holdout: float = option(0.05, above=0.0, max=0.5, help="the seeded fraction of the documents held out")
    split_seed: int = option(0, min=0, help="the seed of which documents are held out")
    split: Literal["train", "eval"] = option("train", help="the split examples come from; training and evaluation set it")
    pack: bool = option(True, help="documents packed apart in a row: no attention or state crosses between them")

    def check(self, vocab_size: int) -> None:
        require(len(self.files) >= 1, "files", "give at least one file, glob or stdlib:GLOB")
        resolve_files(self.files)
        size = self.tokenizer_vocab_size()
        require(size <= vocab_size, "tokenizer",
                f"{self.tokenizer} has {size} tokens, more than the model's vocab_size {vocab_size}")

    def tokenizer_vocab_size(self) -> int:
        if self.tokenizer.startswith(BPE):
            count = self.tokenizer[len(BPE):]
            require(count.isdigit() and int(count) >= 257, "tokenizer",
                    f"{self.tokenizer}: bpe:N needs a whole number N >= 257 (256 bytes and EOS)")
            return int(count)
        return self.tokenizer_model.vocab_size

    def min_seq_len(self) -> int:
        return 1

    def prepare(self, progress: bool = True) -> None:
        """Build the tokenizer and shards now if they are not cached (once per machine), with progress bars."""
        token_shards(self.paths, self.field, self._tokenizer(progress), progress=progress)

    @cached_property
    def paths(self) -> list[Path]:
        return resolve_files(self.files)

    @cached_property
    def tokenizer_model(self) -> ByteTokenizer | HFTokenizer:
        return self._tokenizer(progress=False)

    def tokenizer_files(self) -> dict[str, Path]:
        return self.tokenizer_model.files

    def _tokenizer(self, progress: bool) -> ByteTokenizer | HFTokenizer:
        if not self.tokenizer.startswith(BPE):
            return load_tokenizer(self.tokenizer)
        key = content_key("bpe-v1", self.tokenizer, self.field, str(self.holdout), str(self.split_seed),
                          *map(file_hash, self.paths))

        def train(folder: Path) -> None:  # on the training split only: validation text stays unseen
            count = sum(1 for _ in documents(self.paths, self.field))
            held_out = set(held_out_documents(count, self.holdout, self.split_seed).tolist())
            texts = (text for index, text in enumerate(documents(self.paths, self.field)) if index not in held_out)
            train_bpe(texts, self.tokenizer_vocab_size(), folder, count - len(held_out), progress=progress)

        return HFTokenizer(built(cache_root() / "tokenizers" / key, train))

    @cached_property
    def shards(self) -> Shards:
        return token_shards(self.paths, self.field, self.tokenizer_model, progress=False)

    @cached_property
    def doc_ids(self) -> np.ndarray:
        """This split's documents, (D,) int64, in corpus order."""
        count = len(self.shards.documents)
        held_out = held_out_documents(count, self.holdout, self.split_seed)
        if self.split == "eval":
            return held_out
        return np.setdiff1d(np.arange(count), held_out)

    @cached_property
    def stream(self) -> DocumentStream:
        return DocumentStream(self.shards, self.doc_ids)

    def example(self, seq_len, generator, depth=None):
        tokens, _ = self._window(seq_len, generator)
        return tokens[:-1], tokens[1:]

    def _window(self, seq_len: int, generator: torch.Generator) -> tuple[torch.Tensor, np.ndarray]:
        """seq_len + 1 tokens (int64) from a random place, and where documents begin in them (bool)."""
        if self.stream.total < seq_len + 1:
            raise ValueError(f"task text: the {self.split} split has {self.stream.total} tokens, "
                             f"fewer than seq_len + 1 = {seq_len + 1}")
        start = int(randint(generator, 0, self.stream.total - seq_len))
        tokens, begins = self.stream.window(start, seq_len + 1)
        return torch.from_numpy(tokens), begins

    def batch(self, seq_len: int, seeds: list[int], depth: float | None = None, pack: bool = False) -> Batch:
        """One window per seed. The row's documents are packed sequences when the task's own
        `pack` is set, whatever `pack` says: text rows are never filled with several examples."""
        windows = [self._window(seq_len, torch.Generator().manual_seed(seed)) for seed in seeds]
        ids = torch.stack([tokens for tokens, _ in windows])
        cu_seqlens = None
        if self.pack:
            begins = np.stack([begins[:-1] for _, begins in windows])
            begins[:, 0] = True  # every row starts a sequence
            cu_seqlens = torch.from_numpy(np.append(np.flatnonzero(begins), begins.size))
        return Batch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous(), cu_seqlens)

    def unigram_entropy(self) -> float:
        """Entropy (nats per token) of this split's token frequencies: the loss of the best model
        that ignores context, the baseline a language model must beat."""
        counts = self.shards.token_counts(self.doc_ids)
        probabilities = counts[counts > 0] / counts.sum()
        return float(-(probabilities * np.log(probabilities)).sum())


def held_out_documents(count: int, holdout: float, seed: int) -> np.ndarray:
    """The seeded `holdout` fraction (at least one, never all) of `count` documents, sorted."""
    require(count >= 2, "files", f"the corpus has {count} document(s); holding one out for validation needs 2")
    size = min(count - 1, max(1, math.floor(holdout * count + 0.5)))
    return np.sort(np.random.default_rng(seed).permutation(count)[:size])


class DocumentStream:
    """A split's documents one after another, read in place from the shards (nothing copied)."""

    def __init__(self, shards: Shards, doc_ids: np.ndarray):
        self.shards, self.doc_ids = shards, doc_ids
        self.starts = np.concatenate(([0], np.cumsum(shards.documents[doc_ids, 2])))

    @property
    def total(self) -> int:
        return int(self.starts[-1])

    def window(self, start: int, length: int) -> tuple[np.ndarray, np.ndarray]:
        """(tokens (length,) int64, begins (length,) bool: where a document starts)."""
        virtual = np.arange(start, start + length)
        index = np.searchsorted(self.starts, virtual, side="right") - 1
        positions = virtual - self.starts[index]
        return self.shards.gather(self.doc_ids[index], positions), positions == 0
