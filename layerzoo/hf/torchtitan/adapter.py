"""LayerzooStateDictAdapter: torchtitan's state-dict adapter between a LayerzooTitanModel's
weights (`lm.<name>`) and a layerzoo Hugging Face folder's (`model.<name>`, LayerzooForCausalLM)."""

from __future__ import annotations

from typing import Any

from torch.distributed.checkpoint import HuggingFaceStorageReader
from torchtitan.protocols.state_dict_adapter import StateDictAdapter

from ..errors import HFError

TITAN, HF = "lm.", "model."


class LayerzooStateDictAdapter(StateDictAdapter):
    def to_hf(self, state_dict: dict[str, Any]) -> dict[str, Any]:
        return {HF + strip(name, TITAN): value for name, value in state_dict.items()}

    def from_hf(self, hf_state_dict: dict[str, Any]) -> dict[str, Any]:
        return {TITAN + strip(name, HF): value for name, value in hf_state_dict.items()}

    def get_hf_storage_reader(self, path: str, from_quantized: bool = False) -> HuggingFaceStorageReader:
        return HuggingFaceStorageReader(path)


def strip(name: str, prefix: str) -> str:
    if not name.startswith(prefix):
        raise HFError(f"weight {name!r} is not a layerzoo model's (expected names starting {prefix!r})")
    return name[len(prefix):]
