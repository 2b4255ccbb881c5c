"""Collectives that autograd sees, in the same order on every rank, forward and backward.

Each takes and returns a `link`, a 0-dim tensor threaded from one collective to the next and
finally added (it is zero) to the layer's output: so every rank's graph runs every collective's
backward, in the reverse of the forward order, even where this rank's own result was unused (rank
0 needs nothing from the ranks after it). Nothing is ever waited for outside a collective that
every member of the group reaches, so other groups' collectives (FSDP2's) never wait behind a
point-to-point receive.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ....mixers.states import tensors_in, zip_states
from .group import ContextGroup


def first_link(x: torch.Tensor, module: torch.nn.Module) -> torch.Tensor:
    """The tensor a layer's first collective hangs from: x where it carries gradient (so the
    layer's collectives run after those of the layers above it), else a trainable weight of the
    layer (x of a first layer under frozen embeddings), else x."""
    if x.requires_grad:
        return x
    return next((p for p in module.parameters() if p.requires_grad), x)


class AllGather(torch.autograd.Function):
    """(link, t_1, ...) -> (new link, g_1, ...) with g_i (K, *t_i.shape) every rank's t_i in group
    order; the backward sums every rank's gradient of g_i and gives each rank its own slot."""

    @staticmethod
    def forward(ctx, group: ContextGroup, link: torch.Tensor, *tensors: torch.Tensor):
        ctx.group = group
        gathered = []
        for tensor in tensors:
            parts = [torch.empty_like(tensor) for _ in range(group.size)]
            dist.all_gather(parts, tensor.contiguous(), group=group.process_group)
            gathered.append(torch.stack(parts))
        return (link.new_zeros(()), *gathered)

    @staticmethod
    def backward(ctx, _link_grad, *grads):
        group = ctx.group
        mine = []
        for grad in grads:
            grad = grad.contiguous()
            dist.all_reduce(grad, group=group.process_group)
            mine.append(grad[group.rank])
        return None, None, *mine


def all_gather(group: ContextGroup, link: torch.Tensor, *tensors: torch.Tensor):
    """(new link, [every rank's tensor stacked: (K, *shape)] per tensor); equal shapes on every rank."""
    new_link, *gathered = AllGather.apply(group, link, *tensors)
    return new_link, gathered


class _Shared(torch.autograd.Function):
    """(link, t_1, ...) -> (new link, copies of t_i): forward has already sent the source's values to
    every rank; the backward sums every rank's gradient onto the source's tensors."""

    @staticmethod
    def forward(ctx, group: ContextGroup, source: int, link: torch.Tensor, *tensors: torch.Tensor):
        ctx.group, ctx.source = group, source
        ctx.floating = [t.is_floating_point() for t in tensors]
        ctx.mark_non_differentiable(*(t for t in tensors if not t.is_floating_point()))
        return (link.new_zeros(()), *(t.clone() for t in tensors))

    @staticmethod
    def backward(ctx, _link_grad, *grads):
        group, mine = ctx.group, ctx.group.rank == ctx.source
        out = []
        for grad, floating in zip(grads, ctx.floating):
            if not floating:
                out.append(None)
                continue
            grad = grad.contiguous()
            dist.all_reduce(grad, group=group.process_group)
            out.append(grad if mine else None)
        return None, None, None, *out


def broadcast_tree(group: ContextGroup, source: int, link: torch.Tensor, tree: Any) -> tuple[torch.Tensor, Any]:
    """(new link, the source rank's `tree` on every rank): any state of tensors, its shapes known
    only to the source; gradients flow back to the source's tensors."""
    payload = [zip_states(lambda parts: parts[0].detach(), [tree]) if group.rank == source else None]
    dist.broadcast_object_list(payload, src=group.source(source), group=group.process_group)
    # unpickled tensors land on the device the source saved them from: under NCCL, another rank's GPU
    received = tree if group.rank == source else zip_states(lambda parts: parts[0].to(link.device), [payload[0]])
    leaves = tensors_in(received)
    new_link, *copies = _Shared.apply(group, source, link, *leaves)
    remaining = iter(copies)
    return new_link, zip_states(lambda _: next(remaining), [received])
