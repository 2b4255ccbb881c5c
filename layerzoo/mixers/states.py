"""Mixer states as trees of batch-first tensors: one stream's rows out, several streams' back in.

The contract keeps states small dataclasses (or tuples) of tensors whose first dim is the stream,
so taking streams apart and putting them together is the same for every mixer.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import torch


def select_streams(state: Any, start: int, stop: int) -> Any:
    """The state of streams start..stop-1 alone."""
    return zip_states(lambda parts: parts[0][start:stop], [state])


def concat_streams(states: Sequence[Any]) -> Any:
    """One state holding the streams of `states`, in order; other leaves must agree."""
    return zip_states(torch.cat, list(states))


def zip_states(fn: Callable[[list[torch.Tensor]], Any], trees: list[Any]) -> Any:
    """States of one structure -> one of that structure, each tensor fn(the tensors at its place
    in every tree); a leaf that is not a tensor is kept, and must be equal in every tree."""
    first = trees[0]
    if isinstance(first, torch.Tensor):
        return fn(trees)
    if dataclasses.is_dataclass(first) and not isinstance(first, type):
        return dataclasses.replace(first, **{
            f.name: zip_states(fn, [getattr(tree, f.name) for tree in trees]) for f in dataclasses.fields(first)
        })
    if isinstance(first, tuple) and hasattr(first, "_fields"):  # a named tuple
        return type(first)(*(zip_states(fn, list(items)) for items in zip(*trees)))
    if isinstance(first, (list, tuple)):
        return type(first)(zip_states(fn, list(items)) for items in zip(*trees))
    if isinstance(first, dict):
        return {key: zip_states(fn, [tree[key] for tree in trees]) for key in first}
    if any(tree != first for tree in trees[1:]):
        raise ValueError(f"streams disagree on a state value that is not a tensor: {trees}")
    return first


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
