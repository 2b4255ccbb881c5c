"""The spec's `training:` section: dataclasses whose fields are the keys, with their defaults,
types and bounds, validated with file:line:key errors when a spec is read.

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

from dataclasses import dataclass
from typing import Any, Literal

from ..errors import OptionError, unknown_name_message
from ..mixers import SlidingWindowAttention
from ..options import Section, option
from ..registry import get_mixer
from ..specs import ModelConfig, read_section, register_section
from ..specs.fields import located
from ..specs.yaml_source import KeyPath, Locations, fail
from ..tasks import TASKS
from .precision import Precision


@dataclass(frozen=True)
class TaskConfig(Section):
    """A task name and its complete options (defaults filled in), as the task's to_dict gives them;
    written in a spec as one mapping, `{name: ..., options...}`."""

    name: str = "mqar"
    options: dict[str, Any] = option(factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, **self.options}


@dataclass(frozen=True)
class OptimizerConfig(Section):
    """AdamW with linear warmup then cosine decay to min_lr_ratio * lr; decay only on matrices."""

    lr: float = option(1e-3, min=0.0)
    min_lr_ratio: float = option(0.1, min=0.0, max=1.0)
    warmup_steps: int = option(0, min=0)
    weight_decay: float = option(0.1, min=0.0)
    beta1: float = option(0.9, min=0.0, max=1.0)
    beta2: float = option(0.95, min=0.0, max=1.0)
    grad_clip: float | None = option(1.0, min=0.0)


@dataclass(frozen=True)
class WindowConfig(Section):
    """The SWA window of each step: `fixed` at `long` (or the spec's own windows when long is null),
    or `stochastic`: `short` with probability p_short, else `long`, the last anneal_fraction long only.

    Either sets one window for every SWA layer, so a model whose SWA layers have different
    windows (per-layer overrides) is refused unless the schedule keeps the spec's windows.
    """

    schedule: Literal["fixed", "stochastic"] = "fixed"
    short: int | None = option(None, min=1)
    long: int | None = option(None, min=1)
    p_short: float = option(0.5, min=0.0, max=1.0)
    anneal_fraction: float = option(0.1, min=0.0, max=1.0)

    def validate(self) -> None:
        if self.schedule != "stochastic":
            return
        for key in ("short", "long"):
            if getattr(self, key) is None:
                raise OptionError("", f"a stochastic schedule needs '{key}'")
        if self.short > self.long:
            raise OptionError("short", f"short window {self.short} exceeds long window {self.long}")


@dataclass(frozen=True)
class CurriculumConfig(Section):
    """Segment-count curriculum for segment-recurrent models (ARMT): stage i trains on
    segments[i] * segment_size tokens for stage_steps[i] steps (equal split of `steps` when
    null), the lr schedule restarting each stage; random_segments draws 1..segments[i] per batch.
    segment_size null takes the model's `segment_size` attribute."""

    segments: tuple[int, ...] = option(min=1)
    segment_size: int | None = option(None, min=1)
    stage_steps: tuple[int, ...] | None = option(None, min=1)
    random_segments: bool = False

    def validate(self) -> None:
        if not self.segments:
            raise OptionError("segments", "list at least one segment count, e.g. [2, 4, 8]")
        if self.stage_steps is not None and len(self.stage_steps) != len(self.segments):
            raise OptionError("stage_steps", f"has {len(self.stage_steps)} entries for {len(self.segments)} stages")


@dataclass(frozen=True)
class EvalConfig(Section):
    """Periodic evaluation (every `every` steps on `samples` held-out examples at the training
    length) and the final grid: context lengths x needle depths -> accuracy, at `window`
    (null: the schedule's long window); for the text task, loss against context length on up
    to `documents` held-out documents per length."""

    every: int = option(100, min=1)
    samples: int = option(64, min=1)
    lengths: tuple[int, ...] = option((), min=1)
    depths: tuple[float, ...] = option((0.0, 0.25, 0.5, 0.75, 1.0), min=0.0, max=1.0)
    window: int | None = option(None, min=1)
    batch_size: int = option(16, min=1)
    documents: int = option(8, min=1)  # text: held-out documents per context length in the perplexity report


@dataclass(frozen=True)
class LogConfig(Section):
    """Where metrics go besides metrics.jsonl: `tensorboard` also writes them as TensorBoard
    events under <run folder>/tensorboard, to watch a run live (needs the tensorboard extra)."""

    tensorboard: bool = False


@dataclass(frozen=True)
class TrainingConfig(Section):
    task: TaskConfig = option(factory=TaskConfig)
    seq_len: int = option(256, min=1)
    steps: int = option(1000, min=1)
    batch_size: int = option(16, min=1)
    grad_accum: int = option(1, min=1)
    seed: int = option(0, min=0)
    precision: Precision = "auto"  # precision.py
    compile: bool = False  # torch.compile the model for training and evaluation (a one-time cost per shape)
    optimizer: OptimizerConfig = option(factory=OptimizerConfig)
    window: WindowConfig = option(factory=WindowConfig)
    curriculum: CurriculumConfig | None = None
    eval: EvalConfig = option(factory=EvalConfig)
    log_every: int = option(10, min=1)
    log: LogConfig = option(factory=LogConfig)
    checkpoint_every: int | None = option(500, min=1)  # null: at the last step only (and on SIGINT/SIGTERM)
    keep_checkpoints: int | None = option(2, min=1)  # the newest K; null: all
    out_dir: str | None = None  # null: runs/<spec name>
    parallel: Literal["ddp", "fsdp"] = "ddp"
    mixed_precision: Literal["bf16"] | None = None  # FSDP2's: bf16 copies of the sharded fp32 weights compute
    context: int = option(1, min=1)  # context parallelism: K consecutive ranks share each sequence, a piece each
    # full attention's work even over those ranks where contiguous pieces leave it uneven: more gathered
    balance_attention: bool = True

    def validate(self) -> None:
        if self.batch_size % self.grad_accum:
            raise OptionError("grad_accum", f"batch_size {self.batch_size} is not divisible by grad_accum {self.grad_accum}")
        if self.mixed_precision is not None and self.parallel != "fsdp":
            raise OptionError("mixed_precision", f"needs parallel: fsdp (DDP keeps fp32 weights; precision: "
                                                 f"{self.mixed_precision} autocasts instead)")
        if self.compile and self.context > 1:
            raise OptionError("compile", "does not combine with context parallelism yet; train uncompiled")
        if self.compile and self.parallel == "fsdp":
            raise OptionError("compile", "does not combine with parallel: fsdp yet; train FSDP uncompiled or use ddp")
        if self.mixed_precision is not None and self.precision != "auto":
            raise OptionError("precision", f"{self.precision} does not combine with mixed_precision: {self.mixed_precision}; "
                                           "leave precision at auto (FSDP's mixed precision replaces autocast)")
        stages = None if self.curriculum is None else self.curriculum.stage_steps
        if stages is not None and sum(stages) != self.steps:
            raise OptionError("curriculum.stage_steps", f"sums to {sum(stages)}, training.steps is {self.steps}")

    @property
    def test_window(self) -> int | None:
        """The SWA window of the final reports: eval.window, else the schedule's long window
        (None: the spec's own windows)."""
        return self.eval.window or self.window.long


# The keys a resumed run may change: how often it logs, evaluates and checkpoints, where its folder
# is, and how the global batch is split over micro-batches or sharded, or compiled (rounding only).
# The rest decides what is trained, and a resume with a different value is refused.
RESUME_MAY_CHANGE = ("log_every", "log", "checkpoint_every", "keep_checkpoints", "out_dir", "eval", "grad_accum",
                     "parallel", "compile", "context", "balance_attention")


def read_training(section: Any, locations: Locations, model: ModelConfig | None) -> TrainingConfig:
    """Validate a spec's `training:` mapping against its model (None: a Hugging Face base)."""
    path = ("training",)
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping, got {section!r}")
    if "task" not in section:
        raise fail(locations, path, "missing required key 'task' (e.g. task: {name: niah})")
    vocab_size = None if model is None else model.vocab_size
    task = read_task(section["task"], locations, path + ("task",), vocab_size)
    config = read_section(TrainingConfig, {**section, "task": task}, locations, path)
    shortest = TASKS[task.name](**task.options).bind(vocab_size).min_seq_len()
    for key, lengths in (("seq_len", [config.seq_len]), ("eval", list(config.eval.lengths))):
        if any(length < shortest for length in lengths):
            where = path + ((key,) if key == "seq_len" else ("eval", "lengths"))
            raise fail(locations, where, f"task {task.name} needs sequences of >= {shortest} tokens, got {min(lengths)}")
    check_one_window([(("window",), config.window.long), (("eval", "window"), config.eval.window)], model, locations, path)
    return config


def read_task(section: Any, locations: Locations, path: KeyPath, vocab_size: int | None) -> TaskConfig:
    if not isinstance(section, dict):
        raise fail(locations, path, f"expected a mapping with a task 'name', got {section!r}")
    options = dict(section)
    name = options.pop("name", None)
    if name not in TASKS:
        raise fail(locations, path + ("name",), unknown_name_message("task", str(name), TASKS))
    task = read_section(TASKS[name], options, locations, path)
    if vocab_size is not None:  # a Hugging Face base: its vocabulary is known once loaded (make_task checks)
        try:
            task.bind(vocab_size).check(vocab_size)
        except OptionError as error:
            raise located(error, locations, path) from None
    return TaskConfig(name, task.to_dict())


def check_one_window(windows: list[tuple[KeyPath, int | None]], model: ModelConfig | None, locations: Locations,
                     path: KeyPath) -> None:
    """A window schedule or eval window sets every SWA layer to one window: refuse a model whose
    SWA layers have different windows, rather than silently overwrite its per-layer overrides, and
    a model without SWA layers, where it would silently do nothing.
    windows: (key below `path`, its window or None when unset) of each setting that would."""
    key = next((key for key, window in windows if window is not None), None)
    if model is None or key is None:
        return
    windows = sorted({layer.options["window"] for layer in model.layers
                      if issubclass(get_mixer(layer.type).cls, SlidingWindowAttention)})
    if not windows:
        raise fail(locations, path + key, "sets the SWA layers' window, but this model has no SWA layer; "
                                          "give it window: {schedule: fixed, long: null}")
    if len(windows) > 1:
        raise fail(locations, path + key,
                   f"sets one window for every SWA layer, but this model's SWA layers have windows {windows}; "
                   "drop the per-layer window overrides, or keep them with window: {schedule: fixed, long: null}")


register_section("training", read_training)
