"""A layerzoo attention layer (`attention`, `swa`) on vLLM's paged attention: layerzoo's own
projections, qk-norm, RoPE (at vLLM's positions) and output gate around vLLM's kernel, which
keeps the keys and values in its paged cache and applies the window and the sinks."""

from __future__ import annotations

import torch
from torch import nn
from vllm.config import CacheConfig
from vllm.model_executor.layers.attention import Attention
from vllm.platforms import current_platform

from ...mixers.attention import CausalAttention
from .errors import ServingError


class PagedAttention(nn.Module):
    """forward(x (1, T, d_model), positions (T,)) -> (1, T, d_model): the mixer's output on the T
    tokens vLLM schedules in this step (many sequences' pieces, packed), each attending to its own
    sequence's cached keys.

    Args:
        mixer: the layerzoo attention layer; its weights are used in place.
        cache_config: vLLM's cache config.
        prefix: the layer's unique name in vLLM (one integer in it: the layer index).

    Raises:
        ServingError: vLLM's attention on this platform does not take the layer's head size.
    """

    def __init__(self, mixer: CausalAttention, cache_config: CacheConfig | None, prefix: str):
        super().__init__()
        check_head_size(mixer.head_dim)
        self.mixer = mixer
        scale = mixer.score_scale or mixer.head_dim**-0.5
        self.attn = Attention(mixer.n_heads, mixer.head_dim, scale, mixer.n_kv_heads, cache_config=cache_config,
                              per_layer_sliding_window=mixer.window, prefix=f"{prefix}.attn", sinks=mixer.sink_logits)

    def forward(self, x: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        q, k, v = self.mixer.project(x, positions)
        y = self.attn(q[0].flatten(1), k[0].flatten(1), v[0].flatten(1))
        return self.mixer.heads_output(x, y.view(q.shape))


def check_head_size(head_dim: int) -> None:
    """ServingError naming head_dim and the sizes allowed where vLLM's CPU attention refuses it."""
    if not current_platform.is_cpu():  # the GPU backends state their own sizes when chosen
        return
    from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend

    allowed = CPUAttentionBackend.get_supported_head_sizes()
    if head_dim not in allowed:
        raise ServingError(f"head size {head_dim} is not one vLLM's CPU attention takes ({', '.join(map(str, allowed))}); "
                           f"build the model with another head_dim")
