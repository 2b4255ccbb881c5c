"""What every task is: a seeded generator of (input_ids, targets) examples, and batching of them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import torch

from ..errors import OptionError
from ..options import Section, option

IGNORE = -100  # the target of a position that is not scored (torch cross_entropy's ignore_index)


@dataclass(frozen=True)
class Batch:
    """input_ids (B, T) long; targets (B, T) long, already shifted: targets[:, t] is what the model
    should predict at position t, IGNORE where nothing is scored. cu_seqlens: None, or the (N + 1,)
    offsets of the examples packed into the rows, counted over the flattened batch (B * T): the
    model then reads it as one packed row, and no example sees another."""

    input_ids: torch.Tensor
    targets: torch.Tensor
    cu_seqlens: torch.Tensor | None = None

    @property
    def scored(self) -> int:
        return int((self.targets != IGNORE).sum())

    def to(self, device: torch.device) -> Batch:
        return Batch(*(None if t is None else t.to(device) for t in (self.input_ids, self.targets, self.cu_seqlens)))


@dataclass(frozen=True)
class Task(Section):
    """Base of the task dataclasses: their fields are the options a spec's `training.task` sets,
    with their defaults, types and bounds (a spec Section).

    Subclasses implement `example(seq_len, generator, depth)` -> (input_ids (T,), targets (T,)).
    `pack: true` fills each training row with several examples of random lengths instead of one
    of the full length, each seeing only itself (evaluation stays one example per row).
    """

    pack: bool = option(False, help="fill each training row with several examples, packed apart")
    name: ClassVar[str] = ""
    has_depth: ClassVar[bool] = False  # whether `depth` (needle position, 0..1) means anything
    exact: ClassVar[bool] = False  # accuracy counts whole answers (every scored token of a row right), not tokens

    def bind(self, vocab_size: int) -> "Task":
        """This task with options that default to the model's (vocab_size) filled in."""
        return self

    def check(self, vocab_size: int) -> None:
        """Raise OptionError(key, message) for options this task or the model's vocabulary cannot take."""

    def example(self, seq_len: int, generator: torch.Generator, depth: float | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def prepare(self, progress: bool = True) -> None:
        """Build what the task reads before its first batch (a corpus's token cache); most have nothing."""

    def min_seq_len(self) -> int:
        """The shortest sequence an example fits in."""
        return 2

    def tokenizer_files(self) -> dict[str, Path]:
        """{name in a transformers folder: file} of the tokenizer this task's text is encoded
        with, which a run folder keeps and `layerzoo export` carries; empty when no file
        describes the task's tokens (token ids of a synthetic task, UTF-8 bytes)."""
        return {}

    def batch(self, seq_len: int, seeds: list[int], depth: float | None = None, pack: bool = False) -> Batch:
        """One row per seed, stacked: the same seeds always give the same batch. A row is one
        example, or with `pack` several, their lengths drawn uniformly from min_seq_len() to
        seq_len and the last cut to what is left (a rest too short for an example is padding,
        unscored)."""
        if seq_len < self.min_seq_len():
            raise ValueError(f"task {self.name}: seq_len {seq_len} is too short (needs >= {self.min_seq_len()})")
        if not pack:
            pairs = [self.example(seq_len, torch.Generator().manual_seed(seed), depth) for seed in seeds]
            return Batch(torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs]))
        rows, lengths = [], []
        for seed in seeds:
            generator = torch.Generator().manual_seed(seed)
            pieces = []
            while (rest := seq_len - sum(len(ids) for ids, _ in pieces)) > 0:
                length = min(int(randint(generator, self.min_seq_len(), seq_len + 1)), rest)
                if length < self.min_seq_len():
                    pieces.append((torch.zeros(rest, dtype=torch.long), torch.full((rest,), IGNORE)))
                else:
                    pieces.append(self.example(length, generator, depth))
            rows.append([torch.cat(parts) for parts in zip(*pieces)])
            lengths += [len(ids) for ids, _ in pieces]
        cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
        return Batch(torch.stack([r[0] for r in rows]), torch.stack([r[1] for r in rows]), cu_seqlens)


def randint(generator: torch.Generator, low: int, high: int, size: int = 1) -> torch.Tensor:
    """size integers uniform in [low, high)."""
    return torch.randint(low, high, (size,), generator=generator)


def sample_distinct(generator: torch.Generator, low: int, high: int, count: int) -> torch.Tensor:
    """count distinct integers from [low, high), in random order."""
    return low + torch.randperm(high - low, generator=generator)[:count]


def require(condition: bool, key: str, message: str) -> None:
    if not condition:
        raise OptionError(key, message)
