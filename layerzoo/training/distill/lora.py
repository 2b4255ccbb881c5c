"""LoRA adapters for stage 2 through peft, on the linear projections of the chosen parts of every
block (the mixers', the FFNs'), merged into the weights at the end: the student saved is a plain
CausalLM with no trace of peft."""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from ..errors import TrainingError
from .config import LoraConfig


def require_peft():
    """The peft module; a one-line TrainingError when it is not installed (checked before a run starts)."""
    try:
        import peft
    except ImportError:
        raise TrainingError("distill.end_to_end.lora needs peft: pip install peft (or set lora: null for a full "
                            "fine-tune)") from None
    return peft


def lora_targets(model: nn.Module, modules: Sequence[str]) -> list[str]:
    """The names of the linear layers inside blocks.<i>.<part> of `model`, for each part in `modules`."""
    names = []
    for name, module in model.named_modules():
        parts = name.split(".")
        if isinstance(module, nn.Linear) and len(parts) > 3 and parts[0] == "blocks" and parts[2] in modules:
            names.append(name)
    return names


def with_lora(model: nn.Module, settings: LoraConfig) -> nn.Module:
    """`model` wrapped by peft with a LoRA adapter on each target, its own weights frozen: the
    adapters' B start at zero, so the wrapped model computes what `model` does."""
    peft = require_peft()
    targets = lora_targets(model, settings.modules)
    if not targets:
        raise TrainingError(f"distill.end_to_end.lora.modules {list(settings.modules)}: the student has no linear "
                            "projections there")
    config = peft.LoraConfig(r=settings.rank, lora_alpha=settings.alpha, lora_dropout=settings.dropout,
                             target_modules=targets)
    return peft.LoraModel(model, config, "default")


def merged(wrapped: nn.Module) -> nn.Module:
    """The model a with_lora wrapper holds, each adapter's update added into its weight and the
    adapter removed; every weight trainable again."""
    model = wrapped.merge_and_unload()
    model.requires_grad_(True)
    return model
