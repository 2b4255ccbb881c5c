"""A layerzoo spec's training task as torchtitan's dataloader and tokenizer.

Step s on data-parallel rank r yields the examples `layerzoo train` gives that rank at step s
(`training_batch` with the spec's seed: examples keyed by (seed, step, index), stateless), in its
micro-batches of local_batch_size, in order, so the two trainers see the same global batch and
accumulate it alike, at the step's sequence length (a segment curriculum's stage sets it);
packed documents come as `cu_seqlens` for the model.
Nothing is downloaded: the text task reads its local corpora and cached tokenizer.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from torchtitan.components.dataloader import BaseDataLoader
from torchtitan.components.tokenizer import BaseTokenizer

from ...assemblies.build import vocab_size
from ...specs import Spec, load_spec
from ...tasks import Task, make_task
from ...training.loop.trainer import make_curriculum
from ...training.objectives.batches import training_batch
from ..errors import HFError


def spec_task(spec: Spec) -> Task:
    """The spec's `training.task`, prepared (a corpus tokenized once, cached)."""
    config = spec.training.task
    task = make_task(config.name, config.options, vocab_size(spec))
    task.prepare(progress=False)
    return task


class TaskDataLoader(BaseDataLoader):
    """Yields ({"input": (B, T) ids[, "cu_seqlens": (D+1,)]}, (B, T) labels), B = local_batch_size."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        spec: str = "swax-gdn-tiny"
        overrides: list[str] = field(default_factory=list)

    def __init__(self, config: Config, *, dp_world_size: int, dp_rank: int, tokenizer: Any, seq_len: int,
                 local_batch_size: int, snapshot_every_n_steps: int | None = None):
        spec = load_spec(config.spec, config.overrides)
        if spec.training.batch_size % (local_batch_size * dp_world_size):  # a step must be whole micro-batches
            raise HFError(f"micro-batches of {local_batch_size} examples on each of {dp_world_size} data-parallel ranks "
                          f"do not split the spec's training.batch_size {spec.training.batch_size}; leave torchtitan's "
                          "batch sizes as layerzoo_spec sets them (LAYERZOO_SET training.grad_accum=... accumulates)")
        self.task, self.seed = spec_task(spec), spec.training.seed
        curriculum = make_curriculum(spec.training, spec.armt)
        self.seq_len = (lambda step: seq_len) if curriculum is None else curriculum.seq_len
        self.batch_size = local_batch_size
        share = spec.training.batch_size // dp_world_size  # this rank's examples of a step, as layerzoo train's
        self.starts = range(dp_rank * share, (dp_rank + 1) * share, local_batch_size)
        self.step = 0

    def __iter__(self) -> Iterator[tuple[dict[str, torch.Tensor], torch.Tensor]]:
        while True:
            step = self.step
            self.step += 1  # on its first micro-batch: a checkpoint after the step resumes at the next one
            for start in self.starts:
                indices = range(start, start + self.batch_size)
                batch = training_batch(self.task, self.seq_len(step), self.seed, "train", step, indices, "cpu")
                inputs = {"input": batch.input_ids}
                if batch.cu_seqlens is not None:
                    inputs["cu_seqlens"] = batch.cu_seqlens
                yield inputs, batch.targets

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.step = state_dict["step"]


class TaskTokenizer(BaseTokenizer):
    """The spec's text tokenizer (bytes, a trained BPE or a tokenizer folder) behind torchtitan's
    interface; a synthetic task (MQAR, NIAH) has none, and only its vocabulary size is known."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseTokenizer.Config):
        spec: str = "swax-gdn-tiny"
        overrides: list[str] = field(default_factory=list)

    def __init__(self, config: Config, *, tokenizer_path: str | None = None):
        super().__init__()
        spec = load_spec(config.spec, config.overrides)
        self.tokenizer = getattr(spec_task(spec), "tokenizer_model", None)
        self.vocab_size = vocab_size(spec) if self.tokenizer is None else self.tokenizer.vocab_size
        self.eos_id = None if self.tokenizer is None else self.tokenizer.eos_id

    def encode(self, text: str, *args, **kwargs) -> list[int]:
        return [int(i) for i in self.text_tokenizer().encode_batch([text])[0]]

    def decode(self, ids: list[int], *args, **kwargs) -> str:
        return self.text_tokenizer().decode(ids)

    def get_vocab_size(self) -> int:
        return self.vocab_size

    def text_tokenizer(self):
        if self.tokenizer is None:
            raise HFError("this spec's task is synthetic and has no text tokenizer")
        return self.tokenizer
