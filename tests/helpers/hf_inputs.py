"""What the tests/hf modules share (a module name of its own: every test folder has a conftest)."""

import torch

import layerzoo
from layerzoo.hf.model import CACHE_FIELD

# The shipped tiny specs a transformers model can be made of: every one but ARMT.
TINY = [name for name in layerzoo.shipped_specs() if name.endswith("-tiny") and layerzoo.load_spec(name).armt is None]


def prompts(lengths: list[int], vocab: int, seed: int = 1) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(1, vocab, (length,), generator=generator) for length in lengths]


def cache_of(output):
    """The LayerzooCache of a forward's or generate's output, by this transformers' field name."""
    return getattr(output, CACHE_FIELD)
