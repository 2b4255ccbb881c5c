"""LayerzooTrainer: torchtitan's Trainer taking a spec's batch split and layerzoo's context parallelism.

The batch: torchtitan's local batch size is `layerzoo train`'s micro-batch (split_batch), and the
dataloader hands out the step's examples micro-batch by micro-batch (data.py), so an accumulated
step is `layerzoo train`'s step.

SWAX's window schedule: each step sets the window `layerzoo train` draws for it (WindowSchedule,
a function of the seed and the step) on every SWA layer before its first micro-batch; a segment
curriculum's sequence length per step is the dataloader's (data.py), its learning rate per stage
the schedule's (optimizer.py).

Context parallelism: under `parallelism.context_parallel_degree` K, layerzoo's (training/parallel/
context) replaces torchtitan's, which covers only its own attention and cuts "headtail" pieces that
state passing cannot continue. The K ranks of a cp group load the same examples (torchtitan's
data-parallel rank leaves cp out), and each runs its contiguous piece of every row, every mixer
exchanging what crosses the pieces (an ARMT's pieces hold whole segments, its memory passed on). torchtitan's loss is the piece's summed cross-entropy divided by
the global batch's scored tokens (counted on whole rows, summed over data-parallel ranks only), and
FSDP2 sums the gradients over data x context (torchtitan folds cp into its FSDP mesh): each rank
holds its share of one process's gradient on the global batch, and their sum is that gradient.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import DeviceMesh
from torchtitan.distributed import ParallelDims
from torchtitan.tools.logging import logger
from torchtitan.trainer import Trainer

from ...mixers.window import set_window
from ...specs import load_spec
from ...tasks import Batch
from ...training.loop.schedules import WindowSchedule
from ...training.objectives.language_model import examples_per_rank
from ...training.parallel.context import ContextGroup, context_parallel
from ...training.parallel.context.armt import armt_of
from ...training.parallel.context.batches import piece_of
from ..errors import HFError

DERIVED = 0
"""config_registry's `training.local_batch_size`: the spec's micro-batch, set once the layout is known."""


class LayerzooTrainer(Trainer):
    """torchtitan's Trainer with split_batch at the start, and in each step the spec's window and
    layerzoo's context parallelism."""

    @dataclass(kw_only=True, slots=True)
    class Config(Trainer.Config):
        pass

    def __init__(self, config: Config):
        split_batch(config, int(os.environ.get("WORLD_SIZE", "1")))
        super().__init__(config)
        dims = self.parallel_dims
        model = config.model_spec.model
        training = load_spec(model.spec, model.overrides).training
        self.context_group = None
        if dims.cp_enabled:
            self.context_group = context_group(dims.get_mesh("cp"), training.balance_attention)
            logger.info(f"layerzoo's context parallelism: {dims.cp} ranks, a contiguous piece of every row each "
                        f"(training.balance_attention: {training.balance_attention})")
        armt = armt_of(self.model_parts[0])
        self.segment_size = None if armt is None else armt.segment_size  # an ARMT's pieces hold whole segments
        self.windows = None
        if training.window.schedule != "fixed":
            self.windows = WindowSchedule(training.window, training.steps, training.seed)

    def train_step(self, data_iterator) -> None:
        """One step; first the window the spec's schedule draws for it (self.step counts from 1)."""
        if self.windows is not None:
            set_window(self.model_parts[0], self.windows.window(self.step - 1))
        super().train_step(data_iterator)

    def forward_backward_step(self, *, input_dict: dict[str, torch.Tensor], labels: torch.Tensor,
                              global_valid_tokens: torch.Tensor) -> torch.Tensor:
        """One micro-batch's forward and backward: input_dict["input"] and labels (B, T), with
        "cu_seqlens" for packed rows; under cp, this rank's piece of them (one packed row when packed)."""
        if self.context_group is None:
            return super().forward_backward_step(input_dict=input_dict, labels=labels,
                                                 global_valid_tokens=global_valid_tokens)
        batch = Batch(input_dict["input"], labels, input_dict.get("cu_seqlens"))
        piece, pieces = piece_of(batch, self.context_group, self.segment_size)
        self.ntokens_seen += piece.targets.numel()  # as torchtitan counts under its cp: this rank's tokens
        kwargs = {} if piece.cu_seqlens is None else {"cu_seqlens": piece.cu_seqlens}
        # the backward inside too: activation checkpointing recomputes the blocks on their pieces
        with context_parallel(self.model_parts[0], pieces):
            return self.fwd_bwd_fn(piece.input_ids, piece.targets, global_valid_tokens, kwargs)


def context_group(mesh: DeviceMesh, balance_attention: bool) -> ContextGroup:
    """The ContextGroup of torchtitan's 1-D cp mesh: its process group, ranks in the group's order;
    balance_attention: the spec's training.balance_attention."""
    group = mesh.get_group()
    return ContextGroup(group, dist.get_rank(group), mesh.size(), tuple(dist.get_process_group_ranks(group)),
                        balance_attention)


def split_batch(config: Trainer.Config, world_size: int) -> None:
    """Set torchtitan's local batch size to `layerzoo train`'s micro-batch: the spec's
    training.batch_size over the data-parallel ranks (torchtitan's layout on world_size
    processes) and training.grad_accum, so torchtitan accumulates as many micro-batches.

    Raises:
        HFError: torchtitan's global or local batch size set to another value than the spec's.
        TrainingError: the batch does not split over the data-parallel ranks and micro-batches.
    """
    model = config.model_spec.model
    training = load_spec(model.spec, model.overrides).training
    layout = ParallelDims.from_config(config.parallelism, world_size)
    ranks = layout.dp_replicate * layout.dp_shard
    micro = examples_per_rank(training, ranks) // training.grad_accum
    given = config.training
    if given.global_batch_size != training.batch_size:
        raise HFError(f"training.global_batch_size {given.global_batch_size} is not the spec's training.batch_size "
                      f"{training.batch_size}; set the batch in the spec (LAYERZOO_SET training.batch_size=...)")
    if given.local_batch_size not in (DERIVED, micro):
        raise HFError(f"training.local_batch_size {given.local_batch_size}: the spec's batch of {training.batch_size} "
                      f"over {ranks} data-parallel ranks and training.grad_accum {training.grad_accum} gives {micro}; "
                      "set the accumulation in the spec (LAYERZOO_SET training.grad_accum=...)")
    given.local_batch_size = micro
