"""layerzoo's optimizer and learning-rate schedule in torchtitan's containers.

AdamW with weight decay on matrices only (`layerzoo train`'s `adamw`: norms and biases are not
decayed), as two torchtitan parameter groups named by pattern, and layerzoo's warmup + cosine
schedule (`learning_rate`) as the LambdaLR factor, so both trainers take the same steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from torchtitan.components.optimizer import (
    LRSchedulersContainer,
    OptimizersContainer,
    ParamGroupConfig,
)

from ...training.config import OptimizerConfig
from ...training.loop.schedules import learning_rate


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
    """LRSchedulersContainer whose factor at step s is learning_rate(s) / lr."""

    @dataclass(kw_only=True, slots=True)
    class Config(LRSchedulersContainer.Config):
        lr: float = 1e-3
        min_lr_ratio: float = 0.1
        layerzoo_warmup_steps: int = 0

        def build(self, *, optimizers, training_steps):
            settings = OptimizerConfig(lr=self.lr, min_lr_ratio=self.min_lr_ratio, warmup_steps=self.layerzoo_warmup_steps)
            return LRSchedulersContainer(optimizers, lambda step: learning_rate(step, training_steps, settings) / settings.lr)
