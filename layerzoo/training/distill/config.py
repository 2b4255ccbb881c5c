"""The spec's `distill:` section: how a converted model (the student) is distilled from its teacher,
in two stages, each of which may be skipped (null), not both.

```yaml
distill:
  data: {files: ["corpus/*.txt"], holdout: 0.05}   # the text task's options; the tokenizer is the teacher's
  align:                  # stage 1: each converted layer's new mixer to the teacher's attention output
    steps: 200
    batch_size: 8
    seq_len: 256
    optimizer: {lr: 1e-3, warmup_steps: 10}
  end_to_end:             # stage 2: KL(teacher || student) at a temperature, plus ce_weight * CE
    steps: 200
    optimizer: {lr: 1e-4}
    temperature: 1.0
    ce_weight: 0.0
    lora: {rank: 8, alpha: 16}   # null: a full fine-tune
  window: {schedule: stochastic, short: 16, long: 64, p_short: 0.5, anneal_fraction: 0.1}   # stage 2's SWA windows
  eval: {samples: 16, batch_size: 8}
  precision: auto         # bf16: both stages' forwards (the teacher's too) under bf16 autocast; auto: bf16 on a GPU
```
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ...errors import OptionError, SpecError
from ...options import Section, make_section, option
from ...specs import ModelConfig, Spec, read_section, register_section
from ...specs.files import deep_merge, load_raw, locate
from ...specs.spec import read_spec
from ...specs.yaml_source import Locations, fail, read_yaml
from ...tasks import Text
from ..config import OptimizerConfig, WindowConfig, check_one_window
from ..precision import Precision

# Keys the text task has that distillation sets itself: the teacher's tokenizer, and which split a stage reads.
OWN_DATA_KEYS = {"tokenizer": "the text is read with the teacher's own tokenizer (the conversion's source folder)",
                 "split": "training reads the training split, the held-out measures the held-out one"}
LORA_MODULES = ("mixer", "ffn")

# The keys a resumed distillation may change: how often it logs and checkpoints, its held-out
# measures, and how many ranks share each sequence (rounding only).
RESUME_MAY_CHANGE = ("log_every", "checkpoint_every", "keep_checkpoints", "eval", "context", "balance_attention")


@dataclass(frozen=True)
class StageConfig(Section):
    """What every stage has: its length, batch, sequence length and optimizer (AdamW, warmup then cosine)."""

    steps: int = option(100, min=1, help="optimizer steps of the stage (to skip it, set the stage to null)")
    batch_size: int = option(8, min=1, help="sequences of text per step")
    seq_len: int = option(256, min=1, help="tokens per sequence")
    optimizer: OptimizerConfig = option(factory=OptimizerConfig, help="AdamW and its learning-rate schedule (lr 1e-3 unless set)")


@dataclass(frozen=True)
class AlignConfig(StageConfig):
    """Stage 1, per-layer alignment (LoLCATs' attention transfer): the teacher frozen, only the
    converted layers' new mixers trained, on the MSE between each one's output and the teacher's
    attention output on the teacher's own input to that layer's mixer."""


@dataclass(frozen=True)
class LoraConfig(Section):
    """LoRA through peft on the linear projections of the chosen parts of every block, merged into
    the weights at the end of the stage (the saved student is a plain model)."""

    rank: int = option(8, min=1, help="the rank r of each update B A")
    alpha: float = option(16.0, above=0.0, help="the update's scale is alpha / rank")
    dropout: float = option(0.0, min=0.0, max=0.9, help="dropout on the adapters' inputs")
    modules: tuple[str, ...] = option(LORA_MODULES, help="the parts of each block whose projections get adapters: mixer, ffn")

    def validate(self) -> None:
        unknown = [name for name in self.modules if name not in LORA_MODULES]
        if unknown or not self.modules:
            raise OptionError("modules", f"expected a non-empty list of {', '.join(LORA_MODULES)}, got {list(self.modules)}")


@dataclass(frozen=True)
class EndToEndConfig(StageConfig):
    """Stage 2, end to end: KL(teacher || student) of the next-token distributions at `temperature`
    (times temperature^2, so that its gradients keep their scale), plus ce_weight times the
    cross-entropy on the tokens; the whole student fine-tuned, or LoRA adapters only."""

    optimizer: OptimizerConfig = option(factory=lambda: OptimizerConfig(lr=1e-4),
                                        help="AdamW and its learning-rate schedule (lr 1e-4 unless set)")
    temperature: float = option(1.0, above=0.0, help="softmax temperature of both distributions in the KL")
    ce_weight: float = option(0.0, min=0.0, help="weight of the cross-entropy on the text's own next tokens")
    lora: LoraConfig | None = option(None, help="LoRA adapters instead of a full fine-tune (needs peft)")


@dataclass(frozen=True)
class HeldOutConfig(Section):
    """The held-out text each stage is measured on (at its end, and every `every` steps) and the
    reliance measure of the final student: `samples` (`reliance_samples`) sequences of the held-out split."""

    samples: int = option(16, min=1, help="held-out sequences")
    batch_size: int = option(8, min=1, help="sequences per forward")
    every: int | None = option(None, min=1, help="also measure every this many steps (null: at the end of a stage only)")
    reliance_samples: int | None = option(None, min=1, help="held-out sequences of the reliance measure, which runs "
                                          "the student once per recurrent layer on each (null: samples)")


@dataclass(frozen=True)
class DistillConfig(Section):
    data: dict[str, Any] = option(factory=dict, help="the text task's options (files, field, holdout, split_seed, pack)")
    seed: int = option(0, min=0, help="the seed of the sequences drawn, the window schedule and the LoRA init")
    precision: Precision = option("auto", help="fp32, or bf16: every forward (student and teacher, training and "
                                  "measures) under bf16 autocast, weights, states and losses fp32; auto: bf16 on a "
                                  "GPU that supports it, else fp32")
    align: AlignConfig | None = option(factory=AlignConfig, help="stage 1 (null: skipped)")
    end_to_end: EndToEndConfig | None = option(factory=EndToEndConfig, help="stage 2 (null: skipped)")
    window: WindowConfig = option(factory=WindowConfig, help="stage 2's SWA window per step (SWAX's stochastic windows)")
    eval: HeldOutConfig = option(factory=HeldOutConfig, help="held-out measures and the reliance measure")
    log_every: int = option(10, min=1, help="steps between metrics.jsonl records")
    checkpoint_every: int | None = option(500, min=1, help="steps between checkpoints (null: at a stage's end only)")
    keep_checkpoints: int | None = option(2, min=1, help="the newest K checkpoints of a stage kept (null: all)")
    context: int = option(1, min=1, help="context parallelism under torchrun: K consecutive ranks share each sequence, "
                          "a piece each (K divides the number of processes)")
    balance_attention: bool = option(True, help="with context: full attention's work even over the ranks where "
                                                "contiguous pieces leave it uneven (gathers the queries and outputs too)")

    def validate(self) -> None:
        if self.align is None and self.end_to_end is None:
            raise OptionError("", "both stages are null: nothing to distil (give align, end_to_end or both)")
        for name, stage in self.stages():  # every rank of a context group holds a token or more of each sequence
            if stage.seq_len < self.context:
                raise OptionError(f"{name}.seq_len", f"{stage.seq_len} tokens cannot be split over context {self.context}: "
                                                     f"each rank's piece needs a token; give at least {self.context}")
        for key, reason in OWN_DATA_KEYS.items():
            if key in self.data:
                raise OptionError(f"data.{key}", f"not set here: {reason}")
        text = make_section(Text, dict(self.data), "data")  # unknown keys, types, bounds
        if not text.files:
            raise OptionError("data.files", "give at least one file, glob or stdlib:GLOB of text to distil on")
        object.__setattr__(self, "data", {key: value for key, value in text.to_dict().items() if key not in OWN_DATA_KEYS})

    def stages(self) -> list[tuple[str, StageConfig]]:
        """(name, settings) of the stages to run, in order: align, then end_to_end."""
        return [(name, stage) for name, stage in (("align", self.align), ("end_to_end", self.end_to_end)) if stage]


def read_distill(section: Any, locations: Locations, model: ModelConfig | None) -> DistillConfig:
    """Validate a spec's `distill:` mapping against its (student) model."""
    path = ("distill",)
    if model is None:
        raise fail(locations, path, "distillation needs a model: section (the student's)")
    config = read_section(DistillConfig, section, locations, path)
    check_one_window([(("window",), config.window.long)], model, locations, path)
    return config


register_section("distill", read_distill)

CONFIG_KEYS = ("distill", "name", "description")  # what a distillation's config file may set


def distillation_spec(student: ModelConfig, config: str | Path | dict | None = None, overrides: Iterable[str] = (),
                      source: str = "<student>") -> Spec:
    """The spec of a distillation: the student's model: section (located at `source`, e.g. the
    conversion folder) under a `distill:` section read from `config` (a YAML file with a
    `distill:` mapping, or that mapping as a dict; None: the defaults), then `overrides`
    (`distill.align.steps=50`, as `--set`). Errors name the file, line and key."""
    base, base_locations = read_yaml(yaml.safe_dump({"model": student.to_dict(), "distill": {}}, sort_keys=False), source)
    if config is None:
        data, locations = {}, Locations()
    elif isinstance(config, dict):
        data, locations = read_yaml(yaml.safe_dump({"distill": config}, sort_keys=False), "<dict>")
    else:
        data, locations = load_raw(locate(config))
    for key in data:
        if key not in CONFIG_KEYS:
            raise fail(locations, (key,), f"a distillation config sets {', '.join(CONFIG_KEYS)} only; the model is "
                                          "the conversion's student")
    for assignment in overrides:
        if assignment.partition("=")[0].strip().split(".")[0] != "distill":
            raise SpecError(f"--set {assignment}: a distillation sets distill.* keys only; the model is the "
                            "conversion's student")
    data, locations = deep_merge(base, data, base_locations, locations)
    return read_spec(data, locations, source, overrides)
