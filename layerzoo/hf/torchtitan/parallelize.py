"""parallelize_layerzoo: torchtitan's parallelize_fn for a LayerzooTitanModel.

Per block (an ARMT's: its base's layers), in torchtitan's order: activation checkpointing (the
policy the config selects; not for an ARMT, whose memory hooks read and write only inside its own
segment pass, so a recompute in the backward would run a layer without its memory: ARMT recomputes
whole segments with armt.checkpoint_segments), torch.compile (when `compile.enable` lists "model"),
then FSDP2 over torchtitan's fsdp mesh (the data-parallel shards x the context-parallel ranks: FSDP
sums the gradients over both); the embedding, final norm and head are sharded with the root, and an
ARMT is the root alone (fsdp_units: its layers run once per segment of each packed document). Context parallelism itself runs in each
step (trainer.py). Tensor and pipeline parallelism are refused earlier
(LayerzooTitanModel.Config.update_from_config): no mixer declares a plan for them.
"""

from __future__ import annotations

from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torchtitan.config import TORCH_DTYPE_MAP
from torchtitan.distributed.fsdp import disable_fsdp_gradient_division
from torchtitan.tools.logging import logger

from ...assemblies.armt import ARMT
from ...training.parallel.fsdp import fsdp_units
from .model import LayerzooTitanModel


def parallelize_layerzoo(model: LayerzooTitanModel, *, parallel_dims, training, parallelism, compile_config,
                         ac_config, dump_folder: str = "") -> LayerzooTitanModel:
    """Apply activation checkpointing, per-block compile and FSDP2 to `model` in place; returns it."""
    if ac_config is not None and isinstance(model.lm, ARMT):
        logger.warning("an ARMT's layers take no activation checkpointing under torchtitan; to recompute in the "
                       "backward, set armt.checkpoint_segments: true (whole segments, memory included)")
    elif ac_config is not None:
        policy = ac_config.build(dump_folder=dump_folder)
        for index, block in enumerate(model.lm.blocks):
            model.lm.blocks[index] = policy._wrap_block(block, base_fqn=f"lm.blocks.{index}")
    blocks = model.lm.repeated_blocks()
    if compile_config.enable and "model" in compile_config.components:
        for block in blocks:
            block.compile(backend=compile_config.backend, fullgraph=False)
    if parallel_dims.fsdp_enabled:
        names = ["dp_replicate", "fsdp"] if parallel_dims.dp_replicate_enabled else ["fsdp"]
        mesh = parallel_dims.get_mesh(names)
        policy = MixedPrecisionPolicy(param_dtype=TORCH_DTYPE_MAP[training.mixed_precision_param],
                                      reduce_dtype=TORCH_DTYPE_MAP[training.mixed_precision_reduce])
        for block in fsdp_units(model.lm):
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, mp_policy=policy, reshard_after_forward=False)
        disable_fsdp_gradient_division(model)  # torchtitan's loss is already divided by the global token count
    return model
