"""MQAR, multi-query associative recall (Zoology): key-value pairs, then queries of the keys."""

from __future__ import annotations

from dataclasses import dataclass, replace

import torch

from ..options import option
from .base import IGNORE, Task, require, sample_distinct


@dataclass(frozen=True)
class MQAR(Task):
    """`k1 v1 k2 v2 ... kn vn`, then each key once at a random later position, random tokens between.

    Keys come from [1, V/2) and values from [V/2, V), each drawn without replacement; the target at
    a query is its key's value, IGNORE elsewhere. Filler tokens avoid the example's keys, so every
    later occurrence of a key is a scored query. vocab_size None means the model's.
    """

    name = "mqar"
    num_pairs: int = option(8, min=1, help="key-value pairs per example, each key queried once")
    vocab_size: int | None = option(None, min=1, help="the task's vocabulary (null: the model's)")

    def bind(self, vocab_size: int) -> "MQAR":
        return self if self.vocab_size is not None else replace(self, vocab_size=vocab_size)

    def check(self, vocab_size: int) -> None:
        vocab = self.vocab_size or vocab_size
        require(vocab <= vocab_size, "vocab_size", f"{vocab} exceeds the model's vocab_size {vocab_size}")
        require(self.num_pairs < vocab // 2, "num_pairs",
                f"{self.num_pairs} pairs need more than {2 * self.num_pairs} tokens of vocabulary, have {vocab}")

    def min_seq_len(self) -> int:
        return 3 * self.num_pairs

    def example(self, seq_len, generator, depth=None):
        n, vocab = self.num_pairs, self.vocab_size
        keys = sample_distinct(generator, 1, vocab // 2, n)
        values = sample_distinct(generator, vocab // 2, vocab, n)
        allowed = torch.ones(vocab, dtype=torch.bool)
        allowed[0] = False
        allowed[keys] = False
        allowed = allowed.nonzero().squeeze(1)
        inputs = allowed[torch.randint(len(allowed), (seq_len,), generator=generator)]
        targets = torch.full((seq_len,), IGNORE)
        inputs[0:2 * n:2], inputs[1:2 * n:2] = keys, values
        queries = 2 * n + sample_distinct(generator, 0, seq_len - 2 * n, n)
        inputs[queries] = keys
        targets[queries] = values
        return inputs, targets
