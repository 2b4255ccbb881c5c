"""States as trees of tensors: dataclasses, named tuples, tuples, lists and dicts, nested."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

import torch

from ..mixers.states import zip_states


def tensors_in(tree: Any) -> list[torch.Tensor]:
    """Every tensor in a state, in a fixed order (fields, items, values); other leaves are skipped."""
    if isinstance(tree, torch.Tensor):
        return [tree]
    if dataclasses.is_dataclass(tree) and not isinstance(tree, type):
        return [t for field in dataclasses.fields(tree) for t in tensors_in(getattr(tree, field.name))]
    if isinstance(tree, (list, tuple)):
        return [t for item in tree for t in tensors_in(item)]
    if isinstance(tree, dict):
        return [t for item in tree.values() for t in tensors_in(item)]
    return []


def map_tensors(fn: Callable[[torch.Tensor], Any], tree: Any) -> Any:
    """The same state with every tensor t replaced by fn(t); other leaves kept as they are."""
    return zip_states(lambda tensors: fn(tensors[0]), [tree])
