"""The seeds a run draws from: every example is keyed by (seed, purpose, step or length, index),
and the run's seed is offset per stream, so the examples a run trains on, is measured on while
training and is scored on when it ends never coincide."""

from __future__ import annotations

import hashlib


def example_seed(*parts: int | str) -> int:
    """A 63-bit seed from (run seed, step, index...): stateless, so resumed and sharded runs draw
    exactly the examples an uninterrupted single process would."""
    digest = hashlib.blake2b(",".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


def heldout_seed(seed: int) -> int:
    """The seed of the held-out examples a run of `seed` is measured on while it trains."""
    return seed + 1


def report_seed(seed: int) -> int:
    """The seed of the examples and documents a finished run of `seed` is scored on (its reports)."""
    return seed + 2
