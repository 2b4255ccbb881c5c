"""LayerzooTitanModel: a torchtitan BaseModel over layerzoo's build of a spec.

torchtitan builds the model on the meta device, shards it, moves it with `to_empty` and calls
`init_weights`; here that copies in the weights layerzoo's own build draws from the spec's
`training.seed`, so a torchtitan run starts where `layerzoo train` starts.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.distributed.tensor import DTensor, distribute_tensor
from torchtitan.protocols.model import BaseModel

from ...assemblies.armt import ARMT
from ...assemblies.build import build
from ...assemblies.causal_lm import CausalLM
from ...mixers.window import set_window
from ...specs import load_spec
from ..errors import HFError
from .flops import flops_per_token

# what torchtitan's activation checkpointing inserts into the names of the blocks' weights
CHECKPOINT_WRAPPER = "_checkpoint_wrapped_module."


class LayerzooTitanModel(BaseModel):
    """The CausalLM a spec describes, or its ARMT (around its `model:` stack or its `base:` Hugging
    Face checkpoint), as `self.lm`: (B, T) token ids -> (B, T, vocab_size) logits."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseModel.Config):
        spec: str = "swax-gdn-tiny"
        """A shipped spec's name or a YAML path."""
        overrides: list[str] = field(default_factory=list)
        """`dotted.key=value` strings, as `layerzoo train --set`."""

        def update_from_config(self, *, config, **kwargs) -> None:
            parallelism = config.parallelism
            if parallelism.spmd_backend != "partial_dtensor":
                raise HFError(f"parallelism.spmd_backend {parallelism.spmd_backend}: layerzoo's blocks carry no SPMD "
                              "annotations; use partial_dtensor (DTensor for FSDP only)")
            for degree, what in ((parallelism.tensor_parallel_degree, "tensor"),
                                 (parallelism.pipeline_parallel_degree, "pipeline")):
                if degree > 1:
                    raise HFError(f"{what} parallelism ({degree}) is not supported for layerzoo specs under "
                                  "torchtitan: their mixers declare no sharding plan; use data parallelism (FSDP)")
            if parallelism.context_parallel_degree > 1:
                check_context_layout(parallelism, config.compile)

        def get_nparams_and_flops(self, model: LayerzooTitanModel, seq_len: int) -> tuple[int, int]:
            return sum(p.numel() for p in model.parameters()), flops_per_token(model.lm, seq_len)

    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        spec = load_spec(config.spec, config.overrides)
        self.seed = spec.training.seed if spec.training is not None else 0
        self.lm: CausalLM | ARMT = build(spec, device="meta")
        window = None if spec.training is None else spec.training.window.long
        if window is not None:  # a fixed schedule's window, as layerzoo train sets it
            set_window(self.lm, window)

    def forward(self, input_ids: torch.Tensor, cu_seqlens: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, T, vocab_size) logits; cu_seqlens: the rows' packed documents, as one (1, B*T) sequence."""
        if cu_seqlens is None:
            return self.lm(input_ids)
        return self.lm(input_ids.reshape(1, -1), cu_seqlens=cu_seqlens).reshape(*input_ids.shape, -1)

    def verify_module_protocol(self) -> None:
        """layerzoo's blocks are plain nn.Modules: init_states initialises them all, so none needs the protocol."""

    def init_states(self, *, buffer_device: torch.device | None = None) -> None:
        """Every parameter and buffer as `torch.manual_seed(seed); build(spec)` makes it (on the CPU,
        as layerzoo train draws), each rank keeping its own shard of a sharded one."""
        torch.manual_seed(self.seed)
        reference = build(load_spec(self.config.spec, self.config.overrides))
        values = dict(reference.named_parameters()) | dict(reference.named_buffers())
        with torch.no_grad():
            for wrapped, tensor in [*self.lm.named_parameters(), *self.lm.named_buffers()]:
                name = wrapped.replace(CHECKPOINT_WRAPPER, "")
                if isinstance(tensor, DTensor):
                    mesh = tensor.device_mesh
                    tensor.copy_(distribute_tensor(values[name].to(mesh.device_type), mesh, tensor.placements))
                else:
                    tensor.copy_(values[name])


def check_context_layout(parallelism, compile_config) -> None:
    """HFError for what layerzoo's context parallelism (LayerzooTrainer) cannot take: torchtitan's
    load balancing (its pieces are not contiguous, and state passing continues only a contiguous
    one) and compiled blocks (the exchanges wrap the mixers at each step, as under layerzoo train)."""
    degree, balancer = parallelism.context_parallel_degree, parallelism.context_parallel_load_balancer
    if balancer is not None:
        raise HFError(f"parallelism.context_parallel_load_balancer {balancer}: layerzoo's context parallelism gives "
                      f"each of the {degree} ranks one contiguous piece, which the mixers' states continue; leave it None")
    if compile_config.enable and "model" in compile_config.components:
        raise HFError(f"context parallelism ({degree}) does not combine with compiled blocks yet; "
                      "drop --compile.enable or compile.components' model")
