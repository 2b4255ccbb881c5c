"""layerzoo's optimizer and learning-rate schedule in torchtitan's containers.

AdamW with weight decay on matrices only (`layerzoo train`'s `adamw`: norms and biases are not
decayed), as two torchtitan parameter groups named by pattern, and layerzoo's warmup + cosine
schedule (`learning_rate`, restarted per stage of a segment curriculum) as the LambdaLR factor, so
both trainers take the same steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from torchtitan.components.optimizer import (
    LRSchedulersContainer,
    OptimizersContainer,
    ParamGroupConfig,
)

from ...specs import load_spec
from ...training.config import OptimizerConfig
from ...training.loop.schedules import learning_rate
from ...training.loop.trainer import make_curriculum


def adamw_groups(model, settings: OptimizerConfig) -> OptimizersContainer.Config:
    """Two AdamW groups over `model` (the CausalLM a LayerzooTitanModel holds as `lm`; on meta is enough): vectors without decay, the rest with."""
    vectors = [f"lm.{name}" for name, p in model.named_parameters() if p.requires_grad and p.dim() < 2]
    kwargs = {"lr": settings.lr, "betas": (settings.beta1, settings.beta2), "eps": 1e-8}
    # foreach, as torch's AdamW defaults to and layerzoo train uses: the same updates to the last bit
    return OptimizersContainer.Config(implementation="foreach", param_groups=[
        ParamGroupConfig(pattern="|".join(map(wrapped_name, vectors)), optimizer_name="AdamW",
                         optimizer_kwargs={**kwargs, "weight_decay": 0.0}),
        ParamGroupConfig(pattern=".*", optimizer_name="AdamW",
                         optimizer_kwargs={**kwargs, "weight_decay": settings.weight_decay}),
    ])


def wrapped_name(name: str) -> str:
    """A pattern for parameter `name` that also matches it inside an activation-checkpoint wrapper."""
    return "^" + re.sub(r"(blocks\\\.\d+\\\.)", r"\1(?:_checkpoint_wrapped_module\\.)?", re.escape(name)) + "$"


class LayerzooSchedule(LRSchedulersContainer):
    """LRSchedulersContainer whose factor at step s is `layerzoo train`'s learning rate at s over
    lr: warmup and cosine over the run, or over each stage of a segment curriculum."""

    @dataclass(kw_only=True, slots=True)
    class Config(LRSchedulersContainer.Config):
        spec: str = "swax-gdn-tiny"
        overrides: list[str] = field(default_factory=list)

        def build(self, *, optimizers, training_steps):
            spec = load_spec(self.spec, self.overrides)
            training = spec.training
            settings, curriculum = training.optimizer, make_curriculum(training, spec.armt)

            def factor(step: int) -> float:
                progress, total = (step, training_steps) if curriculum is None else curriculum.stage_progress(step)
                return learning_rate(progress, total, settings) / settings.lr

            return LRSchedulersContainer(optimizers, factor)
