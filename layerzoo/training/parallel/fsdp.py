"""FSDP2: each rank builds the model on the meta device, shards it, then allocates and fills only its shards.

The units are the assembly's `repeated_blocks()`, one FSDP group each, then the model itself (embedding,
final norm, head). An ARMT is one unit, the model (see fsdp_units). With
mixed_precision "bf16" a unit computes with bf16 copies of its fp32 shards and reduce-scatters
gradients in fp32; the optimizer and checkpoints keep fp32.

The weights equal a normal build's with the same seed, to the bit: the numbers are drawn on the CPU
in construction order (assemblies.init), one unit at a time into a full-size scratch copy of that
unit, of which each rank keeps its shard. DTensor's own random ops cannot give that: on a CPU mesh
every rank draws the same numbers for its own shard, and a GPU draws other numbers than a CPU.
A Hugging Face base is not built but read: every rank loads it whole, then shards it.
"""

from __future__ import annotations

import itertools

import torch
from torch import nn
from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from ...assemblies import build
from ...assemblies.armt import ARMT
from ...assemblies.init import construction_order, init_module
from ...specs import Spec


def build_sharded(spec: Spec, device: torch.device, mixed_precision: str | None = None) -> nn.Module:
    """The spec's model, sharded over the default process group, its shards on `device`."""
    policy = mixed_precision_policy(mixed_precision)
    if spec.hf_checkpoint is not None:
        return shard(build(spec), policy)  # fully_shard moves the shards to the mesh's device
    model = shard(build(spec, device="meta"), policy)
    model.to_empty(device=device)
    initialise(model, build(spec, device="meta"))
    return model


def mixed_precision_policy(name: str | None) -> MixedPrecisionPolicy:
    """training.mixed_precision -> FSDP2's policy (None: compute in the weights' own dtype)."""
    if name is None:
        return MixedPrecisionPolicy()
    return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)


def shard(model: nn.Module, policy: MixedPrecisionPolicy) -> nn.Module:
    """fully_shard each of fsdp_units(model), then the model (its remaining parameters); in place."""
    for unit in fsdp_units(model):
        fully_shard(unit, mp_policy=policy)
    return fully_shard(model, mp_policy=policy)


def fsdp_units(model: nn.Module) -> list[nn.Module]:
    """The modules sharded as FSDP units of their own before the model: its repeated blocks, but
    none of an ARMT's. A unit gathers its weights at each call and reduce-scatters at each call's
    backward, and ARMT calls its layers once per segment of each sequence: packed or padded rows
    give ranks different numbers of segments, so per-layer units would issue different numbers
    of collectives on different ranks, and the ranks would hang. As one unit it gathers once a step."""
    return [] if isinstance(model, ARMT) else model.repeated_blocks()


def initialise(model: nn.Module, scratch: nn.Module) -> None:
    """Fill a sharded, allocated model with the weights a normal build would draw.

    scratch: the same model unsharded on the meta device. It is initialised module by module in
    construction order on the CPU; when a module that is an FSDP unit of `model` is done, its
    tensors are copied (each rank its shards) and dropped again, so a rank holds at most the
    model's own parameters and one unit in full. So a module's reset_parameters() may set tensors
    of its submodules only within its own unit (as CausalLM's sets its embedding's).
    """
    units = {name for name, module in model.named_modules() if isinstance(module, FSDPModule)}
    targets = dict(itertools.chain(model.named_parameters(), model.named_buffers()))
    names = {module: name for name, module in scratch.named_modules()}
    filled = set()
    for module in construction_order(scratch):
        init_module(module, "cpu")
        if names[module] not in units:
            continue
        prefix = names[module]
        for name, tensor in itertools.chain(module.named_parameters(prefix), module.named_buffers(prefix)):
            if not tensor.is_meta:
                copy_full(targets[name], tensor)
                filled.add(name)
        module.to("meta")
    if filled != targets.keys():  # a guard: what is left unset holds whatever to_empty's memory held
        raise RuntimeError(f"FSDP initialisation left {sorted(targets.keys() - filled)[:3]} unset")


@torch.no_grad()
def copy_full(target: torch.Tensor, full: torch.Tensor) -> None:
    """Copy the full tensor `full` into `target`, or into this rank's shard of it when target is a DTensor."""
    if isinstance(target, DTensor):
        full = distribute_tensor(full, target.device_mesh, target.placements, src_data_rank=None).to_local()
        target = target.to_local()
    target.copy_(full)
