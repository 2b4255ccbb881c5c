"""ARMT: a causal LM run segment by segment, with associative memory carried between segments.

Each segment is extended with M learned memory tokens, [segment; memory], and run through the base
model with positions local to the segment. Before each memory layer every token reads the memory,
h <- h + read(h); after it the layer's outputs at the memory tokens are written into the memory.
Nothing else crosses a segment boundary: the memory tokens are not carried, only (A, z) per
memory layer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from ...blocks.meta import reset_unless_meta
from ...blocks.packing import Packing, check_packed, lengths_of
from ...kernels.assoc_memory import Memory
from ...mixers.assoc_memory import AssociativeMemory
from ...specs import ARMTConfig
from ..generate import generate
from .backbones import backbone_for
from .fingerprint import fingerprint
from .hooks import SegmentPass, install_memory_hooks, memory_pass

IGNORE_INDEX = -100


@dataclass
class ARMTState:
    """Streaming state of an ARMT model.

    Attributes:
        memory: per memory layer (ascending layer order), its Memory (A, z) in fp32, None while
            empty.
        cache: the base model's cache over the current segment's tokens so far; None at a segment
            start. A layerzoo model's cache is a list of mixer states (a value, reusable); a
            transformers model's is a transformers Cache, which the next call extends in place
            (continue it once).
        length: tokens of the current segment seen so far, 0 <= length < segment_size.
    """

    memory: tuple[Memory | None, ...]
    cache: Any
    length: int


@dataclass
class ARMTStreams:
    """Streaming state of a batch whose rows are at different places in their segments (after
    prompts of different lengths): one ARMTState per row, each continued on its own.

    Attributes:
        rows: one ARMTState per row (per packed sequence).
    """

    rows: list[ARMTState]


class ARMT(nn.Module):
    """Associative recurrent memory transformer around a base causal LM.

    forward(input_ids (B, T) long) -> logits (B, T, V) over all segments, or (logits, state) with
    return_state. Segments end at multiples of segment_size counted from the first token of the
    stream, so any split of a sequence into calls with the state threaded through equals one call;
    a segment's memory write happens in the call that completes it. With labels (B, T) (the
    Hugging Face convention: labels[t + 1] is the target at t, IGNORE_INDEX skipped) it returns the
    mean next-token loss over all segments instead of the logits, each segment's logits dropped
    once its share of the loss is taken.

    Plain attributes you may change between calls: truncate_segments (K: the memory carries
    gradients only across the last K segments of a call; None: across all) and
    checkpoint_segments (recompute each segment in backward instead of storing its activations).

    Args:
        base: the causal LM to wrap: a layerzoo CausalLM or a transformers causal LM (its weights
            used, not copied; the memory layers take its device and dtype).
        config: the ARMTConfig.

    Raises:
        TypeError: base is not a causal LM whose decoder layers ARMT can find.
        ValueError: segment_size + num_mem_tokens exceeds the base model's positions.
        OptionError: a memory layer index is not a layer of the base model.
    """

    def __init__(self, base: nn.Module, config: ARMTConfig):
        super().__init__()
        self.backbone = backbone_for(base)  # views into `base`; the module itself is registered below
        self.base = base
        self.armt_config = config
        self.segment_size = config.segment_size
        self.num_mem_tokens = config.num_mem_tokens
        self.truncate_segments = config.truncate_segments
        self.checkpoint_segments = config.checkpoint_segments
        self.memory_layers = config.layer_indices(len(self.backbone.layers))
        needed = config.segment_size + config.num_mem_tokens
        if self.backbone.max_positions is not None and needed > self.backbone.max_positions:
            raise ValueError(f"segment_size + num_mem_tokens = {needed} exceeds the base model's "
                             f"{self.backbone.max_positions} positions")
        reference = next(base.parameters())
        d_model = self.backbone.d_model
        self.memory_tokens = nn.Parameter(torch.empty(config.num_mem_tokens, d_model, device=reference.device,
                                                      dtype=reference.dtype))
        self.memories = nn.ModuleDict({
            str(index): AssociativeMemory(d_model, **config.memory_options())
            for index in self.memory_layers
        })
        # Not self.to(): that would also cast the base model's fp32 buffers (RoPE frequencies).
        self.memories.to(reference.device, reference.dtype)
        install_memory_hooks(self.backbone.layers, {index: self.memories[str(index)] for index in self.memory_layers},
                             owner=self.memories)
        reset_unless_meta(self)
        # What save_adapter compares against: an adapter holds no base weights, so it must not
        # silently drop changes to them (not in the state_dict: it describes the base as wrapped).
        self.base_fingerprint = fingerprint(base)

    @property
    def config(self) -> Any:
        """The base model's config, as on a transformers model (vocab_size etc.)."""
        return self.base.config

    def reset_parameters(self) -> None:
        """The ARMT's own init, after its modules': memory tokens N(0, 0.02^2), drawn in fp32.

        Drawn last, as a re-initialisation after a meta-device build (children first) draws them.
        """
        tokens = torch.randn(self.memory_tokens.shape, device=self.memory_tokens.device) * 0.02
        with torch.no_grad():
            self.memory_tokens.copy_(tokens)

    def repeated_blocks(self) -> list[nn.Module]:
        """The base model's layers, which training.compile compiles one by one. FSDP shards an ARMT
        as one unit, not by these (training.parallel.fsdp.fsdp_units says why)."""
        return list(self.backbone.layers)

    def forward(self, input_ids: torch.Tensor, state: ARMTState | ARMTStreams | None = None, return_state: bool = False,
                labels: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None,
                cu_seqlens: torch.Tensor | None = None, logits_to_keep: int = 0):
        """The logits (or the loss) over all segments of input_ids, continuing `state`.

        Args:
            input_ids: (B, T >= 1) int64 token ids.
            state: an ARMTState a previous call returned (rows at one place in their segments),
                ARMTStreams (rows at different places, after attention_mask or cu_seqlens), or
                None to start.
            return_state: also return the state after the last token.
            labels: (B, T) targets (labels[t + 1] is the target at t; -100 not scored): the mean
                next-token loss is returned in place of the logits. Rectangular batches only.
            attention_mask: (B, T) of 1 at real tokens and 0 at padding: each row runs alone, its
                logits 0 at padding. Not with cu_seqlens.
            cu_seqlens: (N + 1,) offsets of N sequences packed into one row (B = 1), each run alone.
            logits_to_keep: K > 0: the logits of the last K positions only (each segment still
                computes its own); 0: all.

        Returns:
            logits (B, T, vocab_size) (K positions with logits_to_keep) in the base model's dtype, or with labels the 0-d mean loss
                (fp32); with return_state, (result, state): an ARMTState, or ARMTStreams (one
                ARMTState per sequence) with attention_mask, cu_seqlens or ARMTStreams given.

        Raises:
            ValueError: input_ids not (B, T >= 1) integer ids; labels of another shape, or with
                attention_mask, cu_seqlens or ARMTStreams; both attention_mask and cu_seqlens, or
                either malformed; a state that is not this model's, or of another number of rows.
        """
        if attention_mask is not None or cu_seqlens is not None or isinstance(state, ARMTStreams):
            if labels is not None:
                raise ValueError("ARMT: labels go with rectangular batches, not with attention_mask, cu_seqlens or "
                                 "ARMTStreams")
            if attention_mask is not None and cu_seqlens is not None:
                raise ValueError("ARMT: pass attention_mask or cu_seqlens, not both")
            result = self._forward_rows(input_ids, state, return_state, attention_mask, cu_seqlens)
            return (_tail(result[0], logits_to_keep), result[1]) if return_state else _tail(result, logits_to_keep)
        self._check_inputs(input_ids, state, labels)
        state = state or self.init_state(input_ids.shape[0])
        targets = None if labels is None else F.pad(labels[:, 1:], (0, 1), value=IGNORE_INDEX)
        memory, cache, filled = state.memory, state.cache, state.length
        pieces = self._pieces(input_ids.shape[1], filled)
        outputs = []
        for index, (start, end) in enumerate(pieces):
            # Cutting the memory that enters segment n - K (and every earlier one) leaves gradient
            # paths through the memory only within the last K segments.
            if self.truncate_segments is not None and index <= len(pieces) - self.truncate_segments:
                memory = tuple(None if m is None else Memory(*(t.detach() for t in m)) for m in memory)
            complete = filled + end - start == self.segment_size
            keep_cache = return_state and not complete
            piece_targets = None if targets is None else targets[:, start:end]
            args = (input_ids[:, start:end], memory, cache, filled, complete, keep_cache, piece_targets)
            if self.checkpoint_segments and torch.is_grad_enabled() and cache is None and not keep_cache:
                # Cache-free passes only: recomputing one would extend a transformers cache twice.
                output, memory, cache = checkpoint(self._segment, *args, use_reentrant=False)
            else:
                output, memory, cache = self._segment(*args)
            outputs.append(output)
            filled = 0 if complete else filled + end - start
        new_state = ARMTState(memory, cache, filled)
        if labels is None:
            result = _tail(torch.cat(outputs, dim=1), logits_to_keep)
        else:
            total, count = (torch.stack(parts).sum(0) for parts in zip(*outputs))
            result = total / count.clamp_min(1)
        return (result, new_state) if return_state else result

    def _forward_rows(self, input_ids: torch.Tensor, state: ARMTState | ARMTStreams | None, return_state: bool,
                      attention_mask: torch.Tensor | None, cu_seqlens: torch.Tensor | None):
        """Each sequence alone (a batch row without its padding, or a packed document): segments
        end at each sequence's own positions, so sequences of different lengths cannot share a
        pass. Returns logits shaped like input_ids (zeros at padding) and ARMTStreams."""
        if isinstance(state, ARMTState):
            raise ValueError("ARMT: sequences of different lengths start a stream or continue the ARMTStreams "
                             "of an earlier call, not an ARMTState")
        if cu_seqlens is not None:
            check_packed("ARMT", cu_seqlens, input_ids)
            real = torch.ones_like(input_ids, dtype=torch.bool)
            sequences = list(input_ids[0].split(lengths_of(cu_seqlens).tolist()))
        else:
            if attention_mask is not None:
                Packing.from_mask(attention_mask, input_ids.shape)  # its one-line errors
            real = torch.ones_like(input_ids, dtype=torch.bool) if attention_mask is None else attention_mask.bool()
            sequences = [ids[keep] for ids, keep in zip(input_ids, real)]
        rows = [None] * len(sequences) if state is None else state.rows
        if len(rows) != len(sequences):
            raise ValueError(f"state has {len(rows)} streams, the input {len(sequences)} sequences")
        outputs, states = [], []
        for ids, row in zip(sequences, rows):
            # the class's forward: one set on the instance (context parallelism) wraps the whole call once
            logits, row = type(self).forward(self, ids[None], row, return_state=True) if len(ids) else (None, row)
            outputs.append(logits)
            states.append(row)
        logits = torch.zeros(*input_ids.shape, self.config.vocab_size, device=input_ids.device,
                             dtype=next((o.dtype for o in outputs if o is not None), torch.float32))
        if cu_seqlens is not None:
            logits[0] = torch.cat([o[0] for o in outputs if o is not None])
        else:
            for index, output in enumerate(outputs):
                if output is not None:
                    logits[index, real[index]] = output[0]
        return (logits, ARMTStreams(states)) if return_state else logits

    def _segment(self, input_ids, memory, cache, offset, complete, keep_cache, targets):
        """One pass of the base model over a piece of a segment; with `complete`, the memory tokens too.

        Returns (logits (B, L, V), or (loss sum, target count) with targets; the memory after the
        pass; the base cache when keep_cache).
        """
        embeds = self.backbone.embed(input_ids)
        if complete:
            tokens = self.memory_tokens.to(embeds.dtype).expand(embeds.shape[0], -1, -1)
            embeds = torch.cat((embeds, tokens), dim=1)
        segment = SegmentPass(self.memories, dict(zip(self.memory_layers, memory)), self.num_mem_tokens if complete else 0)
        with memory_pass(segment):
            logits, cache = self.backbone.run(embeds, cache, offset, keep_cache or cache is not None)
        logits = logits[:, :input_ids.shape[1]]
        if complete:
            memory = tuple(segment.written[index] for index in self.memory_layers)
        cache = cache if keep_cache else None
        if targets is None:
            return logits, memory, cache
        loss = F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten(), ignore_index=IGNORE_INDEX, reduction="sum")
        return (loss, (targets != IGNORE_INDEX).sum()), memory, cache

    def _pieces(self, length: int, filled: int) -> list[tuple[int, int]]:
        """(start, end) of each call piece: the rest of the current segment, then whole segments."""
        pieces, start = [], 0
        while start < length:
            end = min(length, start + self.segment_size - filled)
            pieces.append((start, end))
            start, filled = end, 0
        return pieces

    def _check_inputs(self, input_ids: torch.Tensor, state: ARMTState | None, labels: torch.Tensor | None) -> None:
        if input_ids.dim() != 2 or input_ids.shape[1] == 0 or input_ids.is_floating_point():
            raise ValueError(f"input_ids must be integer token ids (batch, length >= 1), got {input_ids.dtype} "
                             f"of shape {tuple(input_ids.shape)}")
        if labels is not None and labels.shape != input_ids.shape:
            raise ValueError(f"labels must have the shape of input_ids {tuple(input_ids.shape)}, got {tuple(labels.shape)}")
        if state is not None and (not isinstance(state, ARMTState) or len(state.memory) != len(self.memory_layers)):
            raise ValueError(f"state must be the ARMTState of this model ({len(self.memory_layers)} memory layers), "
                             f"got {type(state).__name__}")

    def init_state(self, batch_size: int) -> ARMTState:
        """The state of a fresh stream: empty memories, at the start of a segment.

        Args:
            batch_size: rows (the empty state holds no tensors, so it serves any batch).

        Returns:
            ARMTState with memory None per memory layer, cache None and length 0.
        """
        return ARMTState((None,) * len(self.memory_layers), None, 0)

    def state_size(self, seq_len: int) -> int:
        """State elements per sequence after seq_len tokens: one (A, z) memory per memory layer,
        constant, and the base model's cache over the unfinished segment (seq_len % segment_size
        tokens), which a layerzoo base can size; a Hugging Face base only at segment boundaries.

        Args:
            seq_len: tokens seen.

        Returns:
            The memories' elements, plus the base's state_size(seq_len % segment_size) inside a
                segment.

        Raises:
            ValueError: inside a segment, for a base without state_size (a transformers model).
        """
        partial = seq_len % self.segment_size
        memories = sum(self.memories[str(index)].memory_size() for index in self.memory_layers)
        if partial == 0:
            return memories
        if not hasattr(self.base, "state_size"):
            raise ValueError(f"ARMT over a {type(self.base).__name__}: its cache inside a segment has no size here; "
                             f"ask at a multiple of the segment size {self.segment_size}")
        return memories + self.base.state_size(partial)

    def end_token_ids(self) -> tuple[int, ...]:
        """The end tokens `generate` stops at by default.

        Returns:
            The base's generation_config and config `eos_token_id` (each an int, a list or None),
                in that order, without repeats; () when neither names one (a layerzoo base).
        """
        found = []
        for config in (getattr(self.base, "generation_config", None), getattr(self.base, "config", None)):
            ids = getattr(config, "eos_token_id", None)
            for token in ids if isinstance(ids, (list, tuple)) else [ids]:
                if isinstance(token, int) and token not in found:
                    found.append(token)
        return tuple(found)

    def adapter_state_dict(self) -> dict[str, torch.Tensor]:
        """The ARMT's own weights (memory tokens and memory layers), without the base model's."""
        return {name: tensor for name, tensor in self.state_dict().items() if not name.startswith("base.")}

    generate = generate



def _tail(logits: torch.Tensor, keep: int) -> torch.Tensor:
    """logits (B, T, V) -> those of the last `keep` positions (B, keep, V); 0: all of them."""
    return logits[:, logits.shape[1] - keep:] if keep else logits
