"""`--config` functions for `torchrun -m torchtitan.train --module layerzoo.hf.torchtitan`.

torchtitan calls `--config FN` with no arguments and keeps the model spec out of its command line,
so `layerzoo_spec` reads the spec from the environment: LAYERZOO_SPEC (a shipped name or a YAML
path) and LAYERZOO_SET (`--set` overrides, one `dotted.key=value` per line). Every other setting
(steps, checkpointing, parallelism, dump folder) is torchtitan's own flags on top.
"""

from __future__ import annotations

import os

from torchtitan.components.checkpoint import CheckpointManager
from torchtitan.components.loss import CrossEntropyLoss
from torchtitan.components.metrics import MetricsProcessor
from torchtitan.config import ParallelismConfig, TrainingConfig
from torchtitan.protocols.model_spec import ModelSpec

from ...assemblies.build import build
from ...specs import load_spec
from ...training.loop.trainer import make_curriculum
from ..errors import HFError
from .adapter import LayerzooStateDictAdapter
from .data import TaskDataLoader, TaskTokenizer
from .model import LayerzooTitanModel
from .optimizer import LayerzooSchedule, adamw_groups
from .parallelize import parallelize_layerzoo
from .trainer import DERIVED, LayerzooTrainer


def layerzoo_spec() -> LayerzooTrainer.Config:
    """The LayerzooTrainer.Config of the spec LAYERZOO_SPEC with the overrides LAYERZOO_SET."""
    spec = os.environ.get("LAYERZOO_SPEC")
    if not spec:
        raise HFError("set LAYERZOO_SPEC to a spec name or YAML path (and LAYERZOO_SET to its --set overrides, one a line)")
    return trainer_config(spec, [line for line in os.environ.get("LAYERZOO_SET", "").splitlines() if line.strip()])


def trainer_config(spec_name: str, overrides: list[str] = ()) -> LayerzooTrainer.Config:
    """A LayerzooTrainer.Config training `spec_name` with `overrides` as `layerzoo train` would: its model,
    initial weights, task data, batch size, sequence length (per step, under a curriculum), steps,
    window schedule, AdamW groups, learning-rate schedule and clipping."""
    overrides = list(overrides)
    spec = load_spec(spec_name, overrides)
    training = spec.training
    if training is None:
        raise HFError(f"{spec_name}: the spec has no training section to train by")
    make_curriculum(training, spec.armt)  # a curriculum's segment size is checked before anything runs
    settings = training.optimizer
    return LayerzooTrainer.Config(
        model_spec=ModelSpec(name="layerzoo", flavor=spec.name or spec_name,
                             model=LayerzooTitanModel.Config(spec=spec_name, overrides=overrides),
                             parallelize_fn=parallelize_layerzoo, pipelining_fn=None, post_optimizer_build_fn=None,
                             state_dict_adapter=LayerzooStateDictAdapter),
        hf_assets_path="",
        tokenizer=TaskTokenizer.Config(spec=spec_name, overrides=overrides),
        dataloader=TaskDataLoader.Config(spec=spec_name, overrides=overrides),
        loss=CrossEntropyLoss.Config(),
        optimizer=adamw_groups(build(spec, device="meta"), settings),
        lr_scheduler=LayerzooSchedule.Config(spec=spec_name, overrides=overrides),
        # the global batch; its micro-batch is layerzoo train's, known once the layout is (trainer.split_batch)
        training=TrainingConfig(local_batch_size=DERIVED, global_batch_size=training.batch_size,
                                seq_len=training.seq_len, steps=training.steps,
                                # FSDP's compute copies: fp32 unless the spec asks for bf16, as layerzoo train
                                mixed_precision_param="bfloat16" if training.mixed_precision == "bf16" else "float32",
                                mixed_precision_reduce="float32",
                                max_norm=settings.grad_clip if settings.grad_clip else float("inf"),
                                # the mixers read packed rows' offsets on the host: no graph capture
                                disable_cuda_graphs=True),
        # layerzoo's context parallelism: contiguous pieces, no load balancing (LayerzooTrainer)
        parallelism=ParallelismConfig(spmd_backend="partial_dtensor", context_parallel_load_balancer=None),
        metrics=MetricsProcessor.Config(log_freq=training.log_every),
        # every checkpoint resumable, the last one too (torchtitan's default saves it model-only)
        checkpoint=CheckpointManager.Config(interval=training.checkpoint_every or training.steps,
                                            last_save_model_only=False),
    )
