"""The spec's `training:` section: dataclasses whose fields are the keys, validated with file:line:key errors.

```yaml
training:
  task: {name: niah, key_len: 1, value_len: 1}   # name plus the task's own options
  seq_len: 256
  steps: 1200
  batch_size: 16          # global: split over data-parallel ranks, then into grad_accum micro-batches
  optimizer: {lr: 3e-3, warmup_steps: 50}
  window: {schedule: stochastic, short: 16, long: 64, p_short: 0.5, anneal_fraction: 0.1}
  eval: {lengths: [256, 1024], depths: [0, 0.5, 1]}
```
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import did_you_mean, unknown_name_message
from ..mixers.base import OptionError
from ..specs.options import check_type, type_name
from ..specs.yaml_source import KeyPath, Locations, fail
from ..tasks import TASKS


@dataclass(frozen=True)
class TaskConfig:
    """A task name and its complete options (defaults filled in)."""

    name: str = "mqar"
    options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **{k: list(v) if isinstance(v, tuple) else v for k, v in self.options.items()}}


@dataclass(frozen=True)
class OptimizerConfig:
    """AdamW with linear warmup then cosine decay to min_lr_ratio * lr; decay only on matrices."""

    lr: float = 1e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 0
    weight_decay: float = 0.1
    beta1: float = 0.9
    beta2: float = 0.95
    grad_clip: float | None = 1.0


@dataclass(frozen=True)
class WindowConfig:
    """The SWA window of each step: `fixed` at `long` (or the spec's own windows when long is null),
    or `stochastic`: `short` with probability p_short, else `long`, the last anneal_fraction long only."""

    schedule: Literal["fixed", "stochastic"] = "fixed"
    short: int | None = None
    long: int | None = None
    p_short: float = 0.5
    anneal_fraction: float = 0.1


@dataclass(frozen=True)
class CurriculumConfig:
    """Segment-count curriculum for segment-recurrent models (ARMT): stage i trains on
    segments[i] * segment_size tokens for stage_steps[i] steps (equal split of `steps` when
    null), the lr schedule restarting each stage; random_segments draws 1..segments[i] per batch.
    segment_size null takes the model's `segment_size` attribute."""

    segments: tuple[int, ...] = ()
    segment_size: int | None = None
    stage_steps: tuple[int, ...] | None = None
    random_segments: bool = False


@dataclass(frozen=True)
class EvalConfig:
    """Periodic evaluation (every `every` steps on `samples` held-out examples at the training
    length) and the final grid: context lengths x needle depths -> accuracy, at `window`
    (null: the schedule's long window)."""

    every: int = 100
    samples: int = 64
    lengths: tuple[int, ...] = ()
    depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    window: int | None = None
    batch_size: int = 16


@dataclass(frozen=True)
class TrainingConfig:
    task: TaskConfig = field(default_factory=TaskConfig)
    seq_len: int = 256
    steps: int = 1000
    batch_size: int = 16
    grad_accum: int = 1
    seed: int = 0
    precision: Literal["auto", "fp32", "bf16"] = "auto"
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    window: WindowConfig = field(default_factory=WindowConfig)
    curriculum: CurriculumConfig | None = None
    eval: EvalConfig = field(default_factory=EvalConfig)
    log_every: int = 10
    checkpoint_every: int | None = None
    out_dir: str | None = None  # null: runs/<spec name>
    parallel: Literal["ddp", "fsdp"] = "ddp"

    def to_dict(self) -> dict[str, Any]:
        """The `training:` section that validates back to exactly this config."""
        def plain(value):
            if isinstance(value, TaskConfig):
                return value.to_dict()
            if dataclasses.is_dataclass(value):
                return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
            return list(value) if isinstance(value, tuple) else value
        return plain(self)


# Bounds of numeric keys; an int key not listed must be >= 1, a float key not listed is free
# (a task checks its own options).
MINIMUM = {"seed": 0, "warmup_steps": 0, "weight_decay": 0.0, "min_lr_ratio": 0.0, "p_short": 0.0,
           "anneal_fraction": 0.0, "depths": 0.0, "lr": 0.0, "grad_clip": 0.0, "beta1": 0.0, "beta2": 0.0}
MAXIMUM = {"p_short": 1.0, "anneal_fraction": 1.0, "depths": 1.0, "min_lr_ratio": 1.0, "beta1": 1.0, "beta2": 1.0}


def read_training(section: Any, locations: Locations, vocab_size: int | None) -> TrainingConfig | None:
    """Validate a spec's `training:` mapping (None when absent) against a model of `vocab_size`."""
    if section is None:
        return None
    path = ("training",)
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping, got {section!r}")
    if "task" not in section:
        raise fail(locations, path, "missing required key 'task' (e.g. task: {name: niah})")
    rest = {key: value for key, value in section.items() if key != "task"}
    config = read_dataclass(TrainingConfig, rest, locations, path)
    config = dataclasses.replace(config, task=read_task(section["task"], locations, path + ("task",), vocab_size))
    window = config.window
    if window.schedule == "stochastic":
        for key in ("short", "long"):
            if getattr(window, key) is None:
                raise fail(locations, path + ("window",), f"a stochastic schedule needs '{key}'")
        if window.short > window.long:
            raise fail(locations, path + ("window", "short"), f"short window {window.short} exceeds long window {window.long}")
    if config.batch_size % config.grad_accum:
        raise fail(locations, path + ("grad_accum",), f"batch_size {config.batch_size} is not divisible by grad_accum {config.grad_accum}")
    check_curriculum(config, locations, path + ("curriculum",))
    shortest = TASKS[config.task.name](**config.task.options).bind(vocab_size).min_seq_len()
    for key, lengths in (("seq_len", [config.seq_len]), ("eval", list(config.eval.lengths))):
        if any(length < shortest for length in lengths):
            where = path + ((key,) if key == "seq_len" else ("eval", "lengths"))
            raise fail(locations, where, f"task {config.task.name} needs sequences of >= {shortest} tokens, got {min(lengths)}")
    return config


def read_task(section: Any, locations: Locations, path: KeyPath, vocab_size: int | None) -> TaskConfig:
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping with a task 'name', got {section!r}")
    options = dict(section)
    name = options.pop("name", None)
    if name not in TASKS:
        raise fail(locations, path + ("name",), unknown_name_message("task", str(name), TASKS))
    task = read_dataclass(TASKS[name], options, locations, path)
    if vocab_size is None:  # a Hugging Face base: its vocabulary is known once loaded (make_task checks)
        return TaskConfig(name, task.options())
    try:
        task.bind(vocab_size).check(vocab_size)
    except OptionError as error:
        raise fail(locations, path + (error.key,), str(error)) from None
    return TaskConfig(name, task.options())


def check_curriculum(config: TrainingConfig, locations: Locations, path: KeyPath) -> None:
    curriculum = config.curriculum
    if curriculum is None:
        return
    if not curriculum.segments:
        raise fail(locations, path + ("segments",), "list at least one segment count, e.g. [2, 4, 8]")
    if curriculum.stage_steps is not None:
        if len(curriculum.stage_steps) != len(curriculum.segments):
            raise fail(locations, path + ("stage_steps",),
                       f"has {len(curriculum.stage_steps)} entries for {len(curriculum.segments)} stages")
        if sum(curriculum.stage_steps) != config.steps:
            raise fail(locations, path + ("stage_steps",), f"sums to {sum(curriculum.stage_steps)}, training.steps is {config.steps}")


def read_dataclass(cls: type, section: Any, locations: Locations, path: KeyPath):
    """An instance of `cls` from a mapping: known keys, right types, bounds; nested dataclasses recurse."""
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping, got {section!r}")
    hints = typing.get_type_hints(cls)
    known = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in section.items():
        if key not in known:
            raise fail(locations, path + (key,), f"unknown key{did_you_mean(key, known)} (known: {', '.join(known)})")
        values[key] = read_value(key, value, hints[key], locations, path + (key,))
    return cls(**values)


def read_value(key: str, value: Any, annotation: Any, locations: Locations, path: KeyPath) -> Any:
    options = typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else (annotation,)
    if value is None and type(None) in options:
        return None
    inner = [option for option in options if option is not type(None)][0]
    if dataclasses.is_dataclass(inner):
        return read_dataclass(inner, value, locations, path)
    if typing.get_origin(inner) is tuple:
        if not isinstance(value, list):
            raise fail(locations, path, f"expected a list, got {value!r}")
        element = typing.get_args(inner)[0]
        return tuple(read_value(key, item, element, locations, path + (index,)) for index, item in enumerate(value))
    ok, converted = check_type(value, annotation)
    if not ok:
        raise fail(locations, path, f"expected {type_name(annotation).replace('NoneType', 'null')}, got {value!r}")
    if isinstance(converted, (int, float)) and not isinstance(converted, bool):
        low, high = MINIMUM.get(key, 1 if isinstance(converted, int) else None), MAXIMUM.get(key)
        if (low is not None and converted < low) or (high is not None and converted > high):
            bounds = f">= {low}" if high is None else f"between {low} and {high}"  # every bounded key has a low
            raise fail(locations, path, f"must be {bounds}, got {converted}")
    return converted
