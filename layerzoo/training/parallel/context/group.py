"""The context group: the processes that share one sequence, each holding a contiguous piece of it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch.distributed as dist

from .errors import ContextError


@dataclass(frozen=True)
class ContextGroup:
    """K processes holding consecutive pieces of the same sequences, in rank order.

    Attributes:
        process_group: the torch.distributed group of the K processes (None: the default group).
        rank: this process's place in the group, 0..size-1 (which piece it holds).
        size: K, the processes in the group.
        global_ranks: the world ranks of the group's members, in group order.
        balance_attention: full attention splits its queries so that every rank does about the
            same work, where contiguous pieces leave it uneven (attention.worth_balancing: rows
            always); it gathers the queries and the heads' outputs too. On by default (where it
            pays: docs/parallel.md's context benchmark); False keeps contiguous pieces.
    """

    process_group: Any
    rank: int
    size: int
    global_ranks: tuple[int, ...]
    balance_attention: bool = True

    @classmethod
    def from_world(cls, context_size: int, balance_attention: bool = True) -> ContextGroup:
        """Split the initialised world into groups of `context_size` consecutive ranks (context
        inner, data outer: world ranks g*K..g*K+K-1 share sequences) and return this process's.
        Every process must call it, as it creates every group.

        Raises:
            ContextError: context_size is not a positive int dividing the world size.
        """
        world = dist.get_world_size() if dist.is_initialized() else 1
        check_context_size(context_size, world)
        rank = dist.get_rank()
        mine = None
        for first in range(0, world, context_size):
            members = tuple(range(first, first + context_size))
            group = dist.new_group(list(members))  # collective: every process creates every group
            if rank in members:
                mine = cls(group, rank - first, context_size, members, balance_attention)
        return mine

    def source(self, rank_in_group: int) -> int:
        """The world rank of group member `rank_in_group` (torch's broadcasts name sources so)."""
        return self.global_ranks[rank_in_group]


def check_context_size(context_size: int, world_size: int) -> None:
    """Raise ContextError unless context_size is a positive int dividing world_size."""
    if not isinstance(context_size, int) or context_size < 1 or world_size % context_size:
        raise ContextError(f"context size {context_size!r} must be a positive integer dividing the world size {world_size}")
