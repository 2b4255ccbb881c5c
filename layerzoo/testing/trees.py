"""States as trees of tensors: dataclasses, named tuples, tuples, lists and dicts, nested.

`tensors_in` lives with the mixers (their base class checks states with it); it is exported here too."""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..mixers.states import tensors_in, zip_states


def map_tensors(fn: Callable[[torch.Tensor], Any], tree: Any) -> Any:
    """The same state with every tensor t replaced by fn(t); other leaves kept as they are."""
    return zip_states(lambda tensors: fn(tensors[0]), [tree])


__all__ = ["map_tensors", "tensors_in"]
