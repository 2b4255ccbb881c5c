"""Byte-level language modelling on text files: random windows, every next byte scored."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Literal

import torch

from ..options import option
from .base import Task, randint, require


@dataclass(frozen=True)
class ByteLM(Task):
    """Windows of seq_len + 1 bytes from the concatenated `paths`; targets are the next bytes.

    split "train" draws from the first (1 - holdout) of the bytes, "eval" from the rest, so
    evaluation never sees training text.
    """

    name = "bytes"
    paths: tuple[str, ...] = option((), help="the text files, laid end to end")
    holdout: float = option(0.1, above=0.0, max=1.0, help="the last fraction of the bytes, held out for evaluation")
    split: Literal["train", "eval"] = option("train", help="the split examples come from; training and evaluation set it")

    def check(self, vocab_size: int) -> None:
        require(vocab_size >= 256, "name", f"byte-level modelling needs vocab_size >= 256, the model has {vocab_size}")
        require(len(self.paths) >= 1, "paths", "give at least one text file")
        for path in self.paths:
            require(Path(path).is_file(), "paths", f"{path}: no such file")
        require(self.holdout < 1, "holdout", f"must be below 1 (some bytes must be left to train on), got {self.holdout}")

    @cached_property
    def data(self) -> torch.Tensor:
        """The bytes of this split, (N,) uint8."""
        raw = b"".join(Path(path).read_bytes() for path in self.paths)
        cut = round(len(raw) * (1 - self.holdout))
        part = raw[:cut] if self.split == "train" else raw[cut:]
        return torch.frombuffer(bytearray(part), dtype=torch.uint8)

    def example(self, seq_len, generator, depth=None):
        if len(self.data) < seq_len + 1:
            raise ValueError(f"task bytes: the {self.split} split has {len(self.data)} bytes, "
                             f"fewer than seq_len + 1 = {seq_len + 1}")
        start = int(randint(generator, 0, len(self.data) - seq_len))
        window = self.data[start:start + seq_len + 1].long()
        return window[:-1], window[1:]
