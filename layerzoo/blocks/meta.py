"""Construction on the meta device without drawing values that are never kept."""

from __future__ import annotations

import itertools

from torch import nn


def reset_unless_meta(module: nn.Module) -> None:
    """module.reset_parameters(), unless every tensor it holds is on the meta device: such a model
    is allocated and initialised later, module by module (assemblies/init.py), and meta tensors
    have no values to set, only a cost per operation."""
    tensors = list(itertools.chain(module.parameters(), module.buffers()))
    if not tensors or not all(tensor.is_meta for tensor in tensors):
        module.reset_parameters()
