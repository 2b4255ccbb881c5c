"""The associative memory's state: a matrix A and a normalizer z per sequence and head."""

from __future__ import annotations

from typing import NamedTuple

import torch


class Memory(NamedTuple):
    """ARMT's (A, z), in fp32 whatever the activations' dtype (fp64 inputs give fp64).

    matrix: (B, H, key_dim, value_dim), A = sum of beta_i phi(k_i) (x) (v_i - v_bar_i).
    normalizer: (B, H, key_dim), z = sum of gamma_i phi(k_i).
    An empty memory is zeros (or None where an op accepts it): it reads as 0 and writes with
    v_bar = 0, gamma = 1.

    Attributes:
        matrix: (B, H, key_dim, value_dim), A.
        normalizer: (B, H, key_dim), z.
    """

    matrix: torch.Tensor
    normalizer: torch.Tensor

    def plus(self, update: "Memory") -> "Memory":
        """This memory with a write's increments added (not `+`, which would concatenate tuples)."""
        return Memory(self.matrix + update.matrix, self.normalizer + update.normalizer)


def empty_memory(batch_size: int, heads: int, key_dim: int, value_dim: int,
                 device: torch.device | str | None = None) -> Memory:
    """All-zero memory: what ARMT starts from.

    Args:
        batch_size: rows B.
        heads: heads H.
        key_dim: width of a key after the feature map (2 * NU * d).
        value_dim: width of a value.
        device: where the tensors are made; None: the default device.

    Returns:
        Memory of fp32 zeros: matrix (B, H, key_dim, value_dim), normalizer (B, H, key_dim).
    """
    matrix = torch.zeros(batch_size, heads, key_dim, value_dim, device=device)
    return Memory(matrix, matrix.new_zeros(batch_size, heads, key_dim))
