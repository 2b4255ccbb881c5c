"""Question answering over long real text, after BABILong: facts stated among passages of a corpus,
one question about them at the end, scored on its answer.

An example of T tokens: a window of the corpus's split (its documents one after another, the
passages, read round again where the split is shorter), with `facts` sentences "The secret number
of NAME is NUMBER." placed in it at random, then "Question: What is the secret number of NAME?
Answer:" about one of them and the answer " NUMBER", the only scored tokens. Names are distinct
within an example, numbers have `digits` digits. The text around the facts is real, so a
pretrained LM reads it as text; the answer is recalled only by reading back to its fact, which
may be any number of passages earlier.

Each piece (a sentence's words, a name, a number) is encoded on its own and the ids joined, so
the answer's ids are exactly those its fact holds and every length is known before the window is
drawn. Exact match (every answer token the argmax, as greedy decoding would write it) is the
task's accuracy (`Task.exact`); with `score_text` every next token is scored, so that one example
trains language modelling on real text and recall across it at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import torch

from ..options import option
from .base import IGNORE, Task, randint, require, sample_distinct
from .text import Text

# Common first names, one token or a few in any English tokenizer; an example draws `facts` of them.
NAMES = ("Alice", "Bob", "Carol", "David", "Emma", "Frank", "Grace", "Henry", "Irene", "Jack", "Karen", "Louis",
         "Maria", "Nathan", "Olivia", "Peter", "Queenie", "Robert", "Sarah", "Thomas", "Ursula", "Victor", "Wendy",
         "Xavier", "Yvonne", "Zachary", "Anna", "Brian", "Clara", "Daniel", "Ellen", "Felix", "Gloria", "Hugo",
         "Ingrid", "James", "Laura", "Martin", "Nora", "Oscar", "Paula", "Ralph", "Sophie", "Tobias", "Vera",
         "Walter", "Agnes", "Bruno", "Celia", "Dennis")
FACT = ("\nThe secret number of", "{name}", " is", "{number}", ".\n")
QUESTION = ("\nQuestion: What is the secret number of", "{name}", "?\nAnswer:")


@dataclass(frozen=True)
class QA(Text):
    """Facts in passages of `files`, one asked at the end (module docstring). `depth` (0 = start,
    1 = end of the passages) places the asked fact; the others go anywhere. Text's options choose
    the corpus, its tokenizer and its split."""

    name = "qa"
    has_depth = True
    facts: int = option(4, min=1, max=len(NAMES), help="facts stated per example; one of them is asked")
    digits: int = option(4, min=1, max=9, help="digits of each fact's secret number")
    pack: bool = option(False, help="fill each training row with several examples, packed apart")
    score_text: bool = option(False, help="score every next token (language modelling on the passages, facts and "
                                          "question too), not the answer alone; accuracy then counts tokens")

    @property
    def exact(self) -> bool:
        return not self.score_text

    def check(self, vocab_size: int) -> None:
        super().check(vocab_size)
        require(all(len(piece) for piece in self._names), "tokenizer", f"{self.tokenizer} encodes a name as no tokens")

    @cached_property
    def _names(self) -> list[np.ndarray]:
        return self._encode([" " + name for name in NAMES])

    @cached_property
    def _words(self) -> dict[str, np.ndarray]:
        """The fixed pieces of the fact and question sentences, by text."""
        texts = [piece for piece in FACT + QUESTION if not piece.startswith("{")]
        return dict(zip(texts, self._encode(texts)))

    def _encode(self, texts: list[str]) -> list[np.ndarray]:
        return [ids.astype(np.int64) for ids in self.tokenizer_model.encode_batch(texts)]

    def _sentence(self, pieces: tuple[str, ...], name: np.ndarray, number: np.ndarray | None = None) -> torch.Tensor:
        ids = [name if piece == "{name}" else number if piece == "{number}" else self._words[piece] for piece in pieces]
        return torch.from_numpy(np.concatenate(ids))

    def min_seq_len(self) -> int:
        """Every fact, the question and the answer at their longest, and one token of passage (a
        byte-level tokenizer spends at most one token per byte on a number)."""
        name = max(map(len, self._names))
        words = sum(len(self._words[piece]) for piece in FACT if not piece.startswith("{"))
        question = sum(len(self._words[piece]) for piece in QUESTION if not piece.startswith("{"))
        number = self.digits + 1
        return self.facts * (words + name + number) + question + name + number + 1

    def example(self, seq_len, generator, depth=None):
        if seq_len < self.min_seq_len():
            raise ValueError(f"task qa: seq_len {seq_len} is too short (needs >= {self.min_seq_len()})")
        names = sample_distinct(generator, 0, len(NAMES), self.facts).tolist()
        low = 10 ** (self.digits - 1)
        numbers = self._encode([f" {int(n)}" for n in randint(generator, low, 10 * low, self.facts)])
        facts = [self._sentence(FACT, self._names[name], number) for name, number in zip(names, numbers)]
        question = self._sentence(QUESTION, self._names[names[0]])
        answer = torch.from_numpy(numbers[0])
        passages_len = seq_len - sum(map(len, facts)) - len(question) - len(answer)
        passages = self._passages(passages_len, generator)
        asked = round(depth * passages_len) if depth is not None else int(randint(generator, 0, passages_len + 1))
        places = [asked, *randint(generator, 0, passages_len + 1, self.facts - 1).tolist()]
        pieces, start = [], 0
        for place, index in sorted(zip(places, range(self.facts))):
            pieces += [passages[start:place], facts[index]]
            start = place
        ids = torch.cat((*pieces, passages[start:], question, answer))
        targets = torch.full_like(ids, IGNORE)
        if self.score_text:
            targets[:-1] = ids[1:]
        else:
            targets[-len(answer) - 1:-1] = answer  # each answer token predicted from the position before it
        return ids, targets

    def _passages(self, length: int, generator: torch.Generator) -> torch.Tensor:
        """`length` tokens of the split's documents from a random place on, read round again from
        the first document where the split is shorter (filler may repeat; the facts do not)."""
        stream = self.stream
        start, pieces = int(randint(generator, 0, stream.total)), []
        while length > 0:
            take = min(length, stream.total - start)
            pieces.append(torch.from_numpy(stream.window(start, take)[0]))
            length, start = length - take, 0
        return torch.cat(pieces)

    # rows are examples, as every task's are: not Text's windows of documents packed apart
    batch = Task.batch
