"""ARMT's associative memory: the read and write the ARMT assembly places around blocks, and a mixer.

ARMT proper is not a token mixer: it reads memory into the residual stream before a block and
writes the block's outputs at M memory tokens appended to each segment, so it wraps a block and
needs the assembly's segmenting (`layerzoo.assemblies.armt`). What this module offers beside that
is the same memory under the mixer contract, placed like any mixer in a spec pattern.

As a mixer there are no memory tokens, so every token is written: the input is cut into segments
at absolute positions that are multiples of `segment_size`; each token reads the memory as it
stood at the start of its segment, and each segment's tokens are written, against that same
memory, when the segment completes. Because a write is a sum over tokens against the memory of the
segment start, a partial segment's increments can be carried in the state and completed by later
calls; so any split of a sequence equals one call, the state has constant size, and the mixer
passes the registry's conformance checks honestly. It sees nothing of its own segment: pair it
with (sliding-window) attention that covers a segment.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..blocks.meta import reset_unless_meta
from ..blocks.projections import Linear
from ..errors import OptionError
from ..kernels.assoc_memory import BACKENDS, NU, Memory, associative_read, associative_update, empty_memory
from ..options import option
from ..registry import register_mixer
from .base import Mixer, MixerOptions

@dataclass
class AssocMemoryState:
    """Streaming state of the mixer form (batch first; the memories fp32).

    Attributes:
        memory: the Memory (A, z) as of the last segment boundary: what the current segment's
            tokens read.
        pending: a Memory of the increments the current segment's tokens have written so far,
            against `memory`; added to it when the segment completes.
        position: (B,) int64, tokens each stream has seen; its segments end at multiples of
            segment_size.
    """

    memory: Memory
    pending: Memory
    position: torch.Tensor


@dataclass(frozen=True)
class AssociativeMemoryOptions(MixerOptions):
    segment_size: int = option(64, min=1, help="tokens per segment: each reads the memory as of its segment's start")
    d_mem: int = option(64, min=1, max=2**16, help="key width before the DPFP feature map, split over the heads")
    n_heads: int = option(1, min=1, max=2**12, help="heads; d_mem and d_model must divide by it")
    normalize: bool = option(True, help="divide each read by the normalizer z (ARMT's)")
    zero_init_values: bool = option(True, help="start W_v at zero, so that a wrapped model starts unchanged")
    backend: str = option("auto", choices=("auto", *BACKENDS), help="the associative memory kernel backend")

    def validate(self) -> None:
        if self.d_mem % self.n_heads:
            raise OptionError("n_heads", f"d_mem {self.d_mem} is not divisible by n_heads {self.n_heads}")

    def check(self, d_model: int) -> None:
        if d_model % self.n_heads:
            raise OptionError("n_heads", f"d_model {d_model} is not divisible by n_heads {self.n_heads}")


# One head of 16 dims in tests: a read is a ratio, and with heads of a few dims DPFP's sparse features
# leave some tokens with almost no overlap with the memory, where bf16 rounding moves the ratio a lot.
@register_mixer("assoc_memory", test_options={"segment_size": 4, "d_mem": 16, "zero_init_values": False})
class AssociativeMemory(Mixer):
    """ARMT associative memory (DPFP features, delta-rule write); as a mixer, a segment-level memory.

    Shapes: x (B, T, d_model) -> (B, T, d_model). Per head, keys are d_mem / n_heads wide before
    the DPFP feature map (2 * 3 * d_mem / n_heads after it) and values d_model / n_heads wide.
    q = phi(W_q x), k = phi(W_k x), v = W_v x, beta = sigmoid(W_b x), one beta per head.
    Initialisation as in ARMT: W_q, W_k, W_b uniform +-1/sqrt(d_model), W_b bias +1, and W_v zero,
    so that a wrapped pretrained model starts out unchanged. zero_init_values=False draws W_v like
    W_k instead: in a stack trained from scratch a zero W_v keeps the memory empty, and W_q, W_k,
    W_b without gradient, until W_v has moved.

    The streaming state is an AssocMemoryState (see `init_state`).

    Args:
        d_model: width of the input and output; divides by n_heads.
        **options: its options by keyword, each left out at its default: `layerzoo mixers assoc_memory`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: d_mem or d_model does not divide by n_heads.
    """

    layer_type = "linear_attention"
    Options = AssociativeMemoryOptions

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        config = self.options
        self.segment_size = config.segment_size
        self.d_mem = config.d_mem
        self.n_heads = config.n_heads
        self.normalize = config.normalize
        self.backend = config.backend
        self.query = Linear(d_model, config.d_mem, bias=False)
        self.key = Linear(d_model, config.d_mem, bias=False)
        self.value = Linear(d_model, d_model, bias=False)
        self.beta = Linear(d_model, config.n_heads)
        self.zero_init_values = config.zero_init_values
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """ARMT's init, over the projections' nn.Linear defaults (see the class docstring)."""
        bound = 1 / math.sqrt(self.d_model)
        for layer in (self.query, self.key, self.beta):
            nn.init.uniform_(layer.weight, -bound, bound)
        nn.init.constant_(self.beta.bias, 1.0)
        if self.zero_init_values:
            nn.init.zeros_(self.value.weight)
        else:
            nn.init.uniform_(self.value.weight, -bound, bound)

    @property
    def key_dim(self) -> int:
        """Width of a head's key after the feature map."""
        return 2 * NU * self.d_mem // self.n_heads

    def _heads(self, x: torch.Tensor) -> torch.Tensor:
        """(B, T, width) -> (B, T, n_heads, width / n_heads)."""
        return x.unflatten(-1, (self.n_heads, -1))  # not view(..., -1): B or T may be 0

    def read(self, x: torch.Tensor, memory: Memory) -> torch.Tensor:
        """x: (B, T, d_model) -> what the memory returns for each token, (B, T, d_model) in x's dtype."""
        out = associative_read(self._heads(self.query(x)), memory, normalize=self.normalize, backend=self.backend)
        return out.reshape(x.shape).to(x.dtype)

    def update(self, x: torch.Tensor, memory: Memory | None) -> Memory:
        """The increments of writing tokens x (B, M, d_model) against `memory` (None: empty)."""
        return associative_update(
            self._heads(self.key(x)), self._heads(self.value(x)), torch.sigmoid(self.beta(x)), memory,
            normalize=self.normalize, backend=self.backend,
        )

    def write(self, x: torch.Tensor, memory: Memory | None) -> Memory:
        """The memory after writing tokens x (B, M, d_model) into it (None: empty)."""
        update = self.update(x, memory)
        return update if memory is None else memory.plus(update)

    def mix(self, x: torch.Tensor, state: AssocMemoryState | None, cu_seqlens: None):
        """The mixer form: each token reads the memory of its segment's start; segments are written whole.

        Segments end at each stream's own positions: streams at different positions (rows after
        a padded prompt) run one at a time.
        """
        state = state or self.init_state(x.shape[0])
        if len(set(state.position.tolist())) > 1:
            batch, length = x.shape[:2]
            y, state = self.mix_each_sequence(x.reshape(1, batch * length, -1), state,
                                              torch.arange(0, batch * length + 1, length, device=x.device))
            return y.reshape(x.shape), state
        return self._segments(x, state)

    def _segments(self, x: torch.Tensor, state: AssocMemoryState) -> tuple[torch.Tensor, AssocMemoryState]:
        """x (B, T, d_model) continuing B streams that have all seen the same number of tokens."""
        memory, pending = state.memory, state.pending
        position = int(state.position[0]) if len(state.position) else 0
        outputs = [x.new_zeros(x.shape[0], 0, self.d_model)]
        start = 0
        while start < x.shape[1]:
            end = min(x.shape[1], start + self.segment_size - position % self.segment_size)
            piece = x[:, start:end]
            outputs.append(self.read(piece, memory))
            pending = pending.plus(self.update(piece, memory))
            position += end - start
            if position % self.segment_size == 0:
                memory, pending = memory.plus(pending), Memory(*map(torch.zeros_like, pending))
            start = end
        return torch.cat(outputs, dim=1), AssocMemoryState(memory, pending, state.position + x.shape[1])

    def init_state(self, batch_size: int) -> AssocMemoryState:
        """The empty AssocMemoryState for `batch_size` streams.

        Args:
            batch_size: streams B the state holds.

        Returns:
            AssocMemoryState with memory and pending each an all-zero fp32 Memory, matrix
                (B, n_heads, key_dim, d_model / n_heads) and normalizer (B, n_heads, key_dim)
                (key_dim = 6 * d_mem / n_heads), and position (B,) int64 zeros.
        """
        shape = (batch_size, self.n_heads, self.key_dim, self.d_model // self.n_heads)
        device = self.query.weight.device
        return AssocMemoryState(empty_memory(*shape, device=device), empty_memory(*shape, device=device),
                                torch.zeros(batch_size, dtype=torch.long, device=device))

    def memory_size(self) -> int:
        """Elements of one memory (A, z) per sequence: n_heads * key_dim * (d_model / n_heads + 1)."""
        return self.n_heads * self.key_dim * (self.d_model // self.n_heads + 1)

    def state_size(self, seq_len: int) -> int:
        """Two (A, z) pairs, the committed memory and the current segment's writes, and the
        position: constant.

        Args:
            seq_len: tokens seen (the size does not depend on it).

        Returns:
            2 * memory_size() + 1.
        """
        return 2 * self.memory_size() + 1
