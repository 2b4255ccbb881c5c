"""Token-level needle in a haystack after RULER's NIAH tasks, scored on the value tokens.

A needle is `NEEDLE k_1..k_K IS v_1..v_L`; a query at the end is `QUERY k_1..k_K IS v_1..v_L`
and the targets ask for each value token from the position before it (teacher forcing), so the
score is the fraction of value tokens recalled. Filler, keys and values use disjoint vocabulary
ranges: [8, V/2), [V/2, 3V/4), [3V/4, V); tokens 1-3 are the NEEDLE, IS and QUERY markers.

Those are ids of the task's own vocabulary, which a model trained on it learns. A model that reads
a tokenizer's text (a pretrained transformer, its conversion) gets TokenNIAH: the same examples,
each id standing for one of the tokenizer's ordinary tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import torch

from ..errors import OptionError
from ..options import option
from .base import IGNORE, Task, randint, require, sample_distinct

NEEDLE, IS, QUERY = 1, 2, 3
FIRST_FILLER = 8
NOISE_SENTENCE_LEN = 12
VARIANTS = ("single_noise", "single_random", "multikey", "multivalue", "multiquery")


@dataclass(frozen=True)
class NIAH(Task):
    """The NIAH suite; each example draws one of `variants`:

    single_noise   one needle in a haystack of one noise sentence repeated ("the grass is green...")
    single_random  one needle in random filler tokens
    multikey       num_needles needles with distinct keys (distractors), one queried
    multivalue     num_needles needles with one key and distinct values, all values asked in order
    multiquery     num_needles needles with distinct keys, every key asked (random order)

    `depth` (0 = start, 1 = end of the haystack) places the first needle, the queried one;
    the others go at random free places. Multi-needle variants use random filler.
    """

    name = "niah"
    has_depth = True
    variants: tuple[str, ...] = option(VARIANTS, help="the variants examples draw from (each example one)")
    key_len: int = option(2, min=1, help="tokens in a needle's key")
    value_len: int = option(2, min=1, help="tokens in a needle's value")
    num_needles: int = option(4, min=1, help="needles of the multi-needle variants")
    vocab_size: int | None = option(None, min=1, help="the task's vocabulary (null: the model's)")

    def bind(self, vocab_size: int) -> "NIAH":
        return self if self.vocab_size is not None else replace(self, vocab_size=vocab_size)

    def check(self, vocab_size: int) -> None:
        vocab = self.vocab_size or vocab_size
        require(vocab <= vocab_size, "vocab_size", f"{vocab} exceeds the model's vocab_size {vocab_size}")
        require(vocab >= 64, "vocab_size", f"needs >= 64 tokens for disjoint filler/key/value ranges, got {vocab}")
        require(len(self.variants) >= 1, "variants", "name at least one variant")
        for variant in self.variants:
            require(variant in VARIANTS, "variants", f"unknown variant {variant!r} (known: {', '.join(VARIANTS)})")
        require(self.num_needles * self.key_len <= vocab // 4, "num_needles",
                f"{self.num_needles} needles of {self.key_len} key tokens exceed the {vocab // 4} key tokens")
        require(self.num_needles * self.value_len <= vocab // 4, "num_needles",
                f"{self.num_needles} needles of {self.value_len} value tokens exceed the {vocab // 4} value tokens")

    @property
    def needle_len(self) -> int:
        return 2 + self.key_len + self.value_len

    def min_seq_len(self) -> int:
        query = self.needle_len + (self.num_needles - 1) * self.value_len  # multivalue asks for every value
        if "multiquery" in self.variants:
            query = max(query, self.num_needles * self.needle_len)
        # (num_needles + 2) needle lengths of haystack always leave room for the distractors
        return (self.num_needles + 2) * self.needle_len + query

    def example(self, seq_len, generator, depth=None):
        vocab = self.vocab_size
        variant = self.variants[int(randint(generator, 0, len(self.variants)))]
        count = 1 if variant.startswith("single") else self.num_needles
        key_count = 1 if variant == "multivalue" else count
        keys = sample_distinct(generator, vocab // 2, 3 * vocab // 4, key_count * self.key_len).view(key_count, -1)
        values = sample_distinct(generator, 3 * vocab // 4, vocab, count * self.value_len).view(count, -1)
        needles = [self._segment(NEEDLE, keys[min(i, key_count - 1)], values[i]) for i in range(count)]
        if variant == "multivalue":
            asked = [(0, range(count))]
        elif variant == "multiquery":
            asked = [(i, [i]) for i in torch.randperm(count, generator=generator).tolist()]
        else:
            asked = [(0, [0])]
        query, query_targets = self._queries(keys, values, asked)
        haystack_len = seq_len - len(query)
        haystack = self._haystack(variant, haystack_len, generator)
        starts = self._placements(haystack_len, count, depth, generator)
        for needle, start in zip(needles, starts):
            haystack[start:start + self.needle_len] = needle
        if variant == "multivalue":  # the values are asked in the order they appear
            order = sorted(range(count), key=lambda i: starts[i])
            query, query_targets = self._queries(keys, values[order], asked)
        targets = torch.cat((torch.full((haystack_len,), IGNORE), query_targets))
        return torch.cat((haystack, query)), targets

    def _segment(self, marker: int, key: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        return torch.cat((torch.tensor([marker]), key, torch.tensor([IS]), value))

    def _queries(self, keys, values, asked) -> tuple[torch.Tensor, torch.Tensor]:
        """`QUERY key IS value...` per asked (key index, value indices); targets on value tokens."""
        tokens, targets = [], []
        for key_index, value_indices in asked:
            answer = values[list(value_indices)].reshape(-1)
            segment = self._segment(QUERY, keys[key_index], answer)
            target = torch.full_like(segment, IGNORE)
            target[-len(answer) - 1:-1] = answer  # predicted from the position before each value token
            tokens.append(segment)
            targets.append(target)
        return torch.cat(tokens), torch.cat(targets)

    def _haystack(self, variant: str, length: int, generator: torch.Generator) -> torch.Tensor:
        filler = FIRST_FILLER, self.vocab_size // 2
        if variant == "single_noise":
            sentence = torch.randint(*filler, (NOISE_SENTENCE_LEN,), generator=torch.Generator().manual_seed(0))
            return sentence.repeat(length // NOISE_SENTENCE_LEN + 1)[:length].clone()
        return torch.randint(*filler, (length,), generator=generator)

    def _placements(self, haystack_len: int, count: int, depth: float | None, generator) -> list[int]:
        """Start positions of `count` non-overlapping needles; the first at `depth` (random if None),
        the others split at random between the free stretches before and after it."""
        length = self.needle_len
        span = haystack_len - length
        first = round(depth * span) if depth is not None else int(randint(generator, 0, span + 1))
        before, after = first, span - first
        low, high = max(0, count - 1 - after // length), min(count - 1, before // length)
        n_before = int(randint(generator, low, high + 1))
        return ([first] + self._spread(n_before, before, 0, generator)
                + self._spread(count - 1 - n_before, after, first + length, generator))

    def _spread(self, count: int, room: int, offset: int, generator) -> list[int]:
        """Starts of `count` needles at random in `room` tokens from `offset` (stars and bars)."""
        if count == 0:
            return []
        gaps = torch.randint(0, room - count * self.needle_len + 1, (count,), generator=generator).sort().values
        return [offset + int(gap) + i * self.needle_len for i, gap in enumerate(gaps)]


@dataclass(frozen=True)
class TokenNIAH(NIAH):
    """NIAH written in a tokenizer's tokens: the task's id i (vocab_size = len(tokens)) is the
    token tokens[i], in inputs and targets alike, so markers, filler, keys and values are tokens
    the tokenizer has (disjoint sets of them, as the ranges are). A model that reads text
    recalls a needle by copying from context, as induction heads do; nothing here is text it
    was trained on."""

    tokens: tuple[int, ...] = ()

    @cached_property
    def table(self) -> torch.Tensor:
        return torch.tensor(self.tokens, dtype=torch.long)

    def example(self, seq_len, generator, depth=None):
        ids, targets = super().example(seq_len, generator, depth)
        scored = targets != IGNORE
        return self.table[ids], torch.where(scored, self.table[targets.clamp(min=0)], targets)


def in_tokens(tokens: Sequence[int], seed: int = 0, **options) -> TokenNIAH:
    """TokenNIAH (NIAH's `options`) over `tokens`, a tokenizer's ordinary token ids, in an order
    drawn from `seed`: which tokens are filler, keys, values and markers is a seeded choice, not
    the tokenizer's id order (where rare merges come last). OptionError (key "tokenizer") when
    there are too few tokens for the disjoint ranges."""
    if len(tokens) < 64:
        raise OptionError("tokenizer", f"has {len(tokens)} ordinary tokens (not special, not EOS); NIAH needs >= 64 "
                                       "for its disjoint filler, key and value tokens")
    order = torch.randperm(len(tokens), generator=torch.Generator().manual_seed(seed)).tolist()
    task = TokenNIAH(**options, vocab_size=len(tokens), tokens=tuple(int(tokens[i]) for i in order))
    task.check(len(tokens))
    return task
