"""What the family descriptions draw with: the input dtypes, and a seeded generator per case."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

# The input dtypes the checks draw.
DTYPES = (torch.float32, torch.float64, torch.bfloat16)


def generator(draw) -> torch.Generator:
    """A torch generator seeded by hypothesis, so that a case replays from its draws."""
    return torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
