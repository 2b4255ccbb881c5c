"""A corpus tokenized once into memory-mapped token shards with a document index.

A cache folder holds:
  shard-00000.bin ...  the tokens, uint16 when the vocabulary fits, else uint32; whole documents,
                       each stored as [EOS, tokens...] (see tokenizer.py), one after another
  documents.npy        (N, 4) int64 per document: shard, offset in it, tokens (EOS included), UTF-8 bytes
  meta.json            vocabulary, EOS, dtype, tokenizer and the files' hashes, counts
Documents are encoded a batch at a time by the tokenizer's batch encoder (no Python per token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .cache import built, cache_root, content_key, file_hash
from .corpus import file_format, read_documents

FORMAT = "shards-v1"
SHARD_TOKENS = 1 << 28  # 512 MiB of uint16 per file
BATCH_CHARACTERS = 1 << 22  # text handed to the batch encoder at once


@dataclass(frozen=True)
class Shards:
    """An opened cache folder. tokens: one read-only memmap per shard; documents: (N, 4) as above."""

    folder: Path
    tokens: tuple[np.memmap, ...]
    documents: np.ndarray
    vocab_size: int
    eos_id: int

    def gather(self, doc_ids: np.ndarray, positions: np.ndarray) -> np.ndarray:
        """Tokens at `positions` (K,) of the documents `doc_ids` (K,) -> (K,) int64."""
        shard = self.documents[doc_ids, 0]
        offsets = self.documents[doc_ids, 1] + positions
        if len(self.tokens) == 1:
            return self.tokens[0][offsets].astype(np.int64)
        out = np.empty(len(offsets), dtype=np.int64)
        for index in np.unique(shard):
            here = shard == index
            out[here] = self.tokens[index][offsets[here]]
        return out

    def document(self, doc_id: int) -> np.ndarray:
        """One document's tokens, [EOS, tokens...], (length,) int64."""
        shard, offset, length, _ = self.documents[doc_id]
        return self.tokens[shard][offset:offset + length].astype(np.int64)

    def token_counts(self, doc_ids: np.ndarray) -> np.ndarray:
        """(vocab_size,) how often each token occurs in the documents doc_ids."""
        member = np.zeros(len(self.documents), dtype=bool)
        member[doc_ids] = True
        counts = np.zeros(self.vocab_size, dtype=np.int64)
        for index, tokens in enumerate(self.tokens):
            here = self.documents[:, 0] == index  # documents tile their shard in order
            mask = np.repeat(member[here], self.documents[here, 2])
            counts += np.bincount(tokens[mask], minlength=self.vocab_size)
        return counts


def token_shards(files: list[Path], field: str, tokenizer, *, progress: bool = True,
                 shard_tokens: int = SHARD_TOKENS) -> Shards:
    """The shards of `files` under `tokenizer`, built on first use (see cache.py), opened."""
    sources = [f"{file_format(path)}:{field if file_format(path) != 'text' else ''}:{file_hash(path)}" for path in files]
    key = content_key(FORMAT, tokenizer.identity, str(shard_tokens), *sources)
    folder = built(cache_root() / "shards" / key,
                   lambda partial: write_shards(partial, files, field, tokenizer, progress, shard_tokens))
    return open_shards(folder)


@lru_cache(maxsize=8)
def open_shards(folder: Path) -> Shards:
    meta = json.loads((folder / "meta.json").read_text())
    tokens = tuple(np.memmap(folder / name, dtype=meta["dtype"], mode="r") for name in meta["shards"])
    return Shards(folder, tokens, np.load(folder / "documents.npy"), meta["vocab_size"], meta["eos_id"])


def write_shards(folder: Path, files: list[Path], field: str, tokenizer, progress: bool, shard_tokens: int) -> None:
    dtype = np.uint16 if tokenizer.vocab_size <= 1 << 16 else np.uint32
    writer = ShardWriter(folder, dtype, tokenizer.eos_id, shard_tokens)
    total = sum(path.stat().st_size for path in files)
    with tqdm(total=total, unit="B", unit_scale=True, desc="tokenizing", disable=not progress,
              dynamic_ncols=True, mininterval=0.5) as bar:
        texts, characters = [], 0
        for path in files:
            for text in read_documents(path, field):
                texts.append(text)
                characters += len(text)
                if characters >= BATCH_CHARACTERS:
                    writer.add(tokenizer.encode_batch(texts), texts)
                    texts, characters = [], 0
            bar.update(path.stat().st_size)
        if texts:
            writer.add(tokenizer.encode_batch(texts), texts)
    writer.close()
    meta = {"format": FORMAT, "vocab_size": tokenizer.vocab_size, "eos_id": tokenizer.eos_id,
            "dtype": np.dtype(dtype).name, "tokenizer": tokenizer.identity, "shards": writer.names,
            "documents": len(writer.index), "tokens": int(sum(row[2] for row in writer.index)),
            "files": [{"path": str(path), "blake2b": file_hash(path)} for path in files]}
    np.save(folder / "documents.npy", np.array(writer.index, dtype=np.int64).reshape(-1, 4))
    (folder / "meta.json").write_text(json.dumps(meta, indent=1))


class ShardWriter:
    """Appends documents to shard files, starting a new one when the next document would pass
    shard_tokens (a document never spans two shards)."""

    def __init__(self, folder: Path, dtype, eos_id: int, shard_tokens: int):
        self.folder, self.dtype, self.eos_id, self.shard_tokens = folder, dtype, eos_id, shard_tokens
        self.index: list[tuple[int, int, int, int]] = []
        self.names: list[str] = []
        self.file, self.filled = None, 0

    def add(self, encoded: list[np.ndarray], texts: list[str]) -> None:
        for ids, text in zip(encoded, texts):
            tokens = np.concatenate(([self.eos_id], ids)).astype(self.dtype)
            if self.file is None or (self.filled and self.filled + len(tokens) > self.shard_tokens):
                self._next_shard()
            self.file.write(tokens.tobytes())
            self.index.append((len(self.names) - 1, self.filled, len(tokens), len(text.encode("utf-8"))))
            self.filled += len(tokens)

    def _next_shard(self) -> None:
        self.close()
        self.names.append(f"shard-{len(self.names):05d}.bin")
        self.file, self.filled = (self.folder / self.names[-1]).open("wb"), 0

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
