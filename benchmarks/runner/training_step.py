"""One language-model training step as the training benchmarks time it: forward, loss, backward, AdamW."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def training_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, ids: torch.Tensor, targets: torch.Tensor,
                  **model_inputs) -> None:
    """ids, targets (B, T) (targets -100 where no loss is taken); model_inputs: cu_seqlens, attention_mask."""
    logits = model(ids, **model_inputs)
    loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=-100)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
