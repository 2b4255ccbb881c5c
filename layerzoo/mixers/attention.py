"""Causal multi-head attention, full or sliding-window, with grouped KV heads, RoPE, qk-norm and
optionally an output gate (Qwen3-Next) and attention sinks (GPT-OSS)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ..blocks.meta import reset_unless_meta
from ..blocks.norms import RMSNorm
from ..blocks.packing import (
    concat_sequences, last_of_rows, lengths_of, offsets_of, positions_in_sequences, right_aligned,
)
from ..blocks.projections import Linear
from ..blocks.rotary import Rotary
from ..errors import OptionError
from ..kernels import sliding_window_attention
from ..kernels.sliding_window import BACKENDS as ATTENTION_BACKENDS, SINKS as SINK_BACKENDS
from ..kernels.sliding_window.reference import sliding_window_attention_weights
from ..options import option
from ..registry import register_mixer
from .attention_weights import record, recording
from .base import Mixer, MixerOptions
from .kv_buffer import extend
from .from_attention import TeacherAttention


@dataclass
class KVCache:
    """Streaming state of attention for N streams.

    Full attention keeps every token; sliding-window attention keeps the last window-1 (constant
    memory). Streams that saw different numbers of tokens (a padded batch, packed sequences) have
    ragged histories.

    Attributes:
        k: (N, L, n_kv_heads, head_dim) keys after RoPE, oldest first, in the weights' dtype.
        v: (N, L, n_kv_heads, head_dim) values, as k.
        lengths: (N,) int64, how many of the L slots hold stream n's keys (its last lengths[n];
            the slots in front are unused), or None when every stream fills all L.
        position: (N,) int64, tokens each stream has seen (the RoPE position of its next token).
    """

    k: torch.Tensor
    v: torch.Tensor
    lengths: torch.Tensor | None
    position: torch.Tensor


@dataclass(frozen=True)
class AttentionOptions(MixerOptions):
    """The options of both attention forms; sliding-window attention adds `window`."""

    n_heads: int = option(8, min=1, help="query heads")
    n_kv_heads: int | None = option(None, min=1, help="key/value heads, dividing n_heads (grouped-query attention); null: n_heads")
    head_dim: int | None = option(None, min=2, help="channels per head, even (RoPE); null: d_model // n_heads (Qwen3 sets its own)")
    rope_theta: float = option(10000.0, above=0.0, help="RoPE base")
    qkv_bias: bool = option(False, help="biases on the query, key and value projections (Qwen2)")
    qk_norm: bool = option(False, help="RMSNorm (a weight per channel) on each head's queries and keys, before RoPE (Qwen3)")
    qk_norm_eps: float = option(1e-6, above=0.0, help="epsilon of the qk-norm RMSNorms")
    score_scale: float | None = option(None, above=0.0, help="the factor on the query-key scores; null: head_dim ** -0.5 "
                                                             "(Gemma-3: query_pre_attn_scalar ** -0.5)")
    output_gate: bool = option(False, help="multiply the heads' output by sigmoid(gate_proj(x)) (Qwen3-Next)")
    sinks: bool = option(False, help="a learned sink logit per head in every softmax denominator (GPT-OSS)")
    backend: str = option("auto", choices=("auto", *ATTENTION_BACKENDS), help="the sliding_window_attention backend")

    def check(self, d_model: int) -> None:
        if self.head_dim is not None:
            if self.head_dim % 2:
                raise OptionError("head_dim", f"head_dim {self.head_dim} must be even for RoPE")
        elif d_model % self.n_heads:
            raise OptionError("n_heads", f"d_model {d_model} is not divisible by n_heads {self.n_heads}; set head_dim")
        elif (d_model // self.n_heads) % 2:
            raise OptionError("n_heads", f"head_dim d_model/n_heads = {d_model // self.n_heads} must be even for RoPE")
        if self.n_kv_heads is not None and self.n_heads % self.n_kv_heads:
            raise OptionError("n_kv_heads", f"n_heads {self.n_heads} is not divisible by n_kv_heads {self.n_kv_heads}")
        if self.sinks and self.backend not in ("auto", *SINK_BACKENDS):
            raise OptionError("sinks", f"the {self.backend!r} backend has no attention sinks; use auto, {', '.join(SINK_BACKENDS)}")


@dataclass(frozen=True)
class SlidingWindowOptions(AttentionOptions):
    window: int = option(128, min=1, help="keys each query attends to, itself included; settable at run time")


class CausalAttention(Mixer):
    """Causal multi-head attention over the last `window` keys (all of them when the options have
    no window), with grouped KV heads, RoPE and optional qk-norm: the body of the two registered
    forms, `attention` and `swa`, which differ in their options.

    output_gate: the attention output is multiplied elementwise by sigmoid(gate_proj(x)) before the
    output projection, so a head can switch itself off per token (Qwen3-Next's gated attention).
    sinks: a learned logit per head (`sink_logits`, zero at init) joins every softmax denominator,
    so a query can give its keys less than all of its attention (GPT-OSS).

    Shapes: x (B, T, d_model) -> (B, T, d_model); head_dim defaults to d_model // n_heads; the
    heads' width n_heads * head_dim need not be d_model (q_proj (n_heads * head_dim, d_model),
    out_proj (d_model, n_heads * head_dim)).
    """

    packs_sequences = True
    Options = AttentionOptions
    # Converted from a teacher's attention layer: its shape kept, these taken unless the pattern sets them.
    defaults_from_attention = ("output_gate", "sinks", "backend")

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        config = self.options
        self.n_heads = config.n_heads
        self.n_kv_heads = config.n_kv_heads or config.n_heads
        self.head_dim = config.head_dim or d_model // config.n_heads
        self.backend = config.backend
        self.score_scale = config.score_scale
        width, kv_width = self.n_heads * self.head_dim, self.n_kv_heads * self.head_dim
        self.q_proj = Linear(d_model, width, bias=config.qkv_bias)
        self.kv_proj = Linear(d_model, 2 * kv_width, bias=config.qkv_bias)
        self.out_proj = Linear(width, d_model, bias=False)
        self.rotary = Rotary(self.head_dim, config.rope_theta)
        self.q_norm = RMSNorm(self.head_dim, config.qk_norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(self.head_dim, config.qk_norm_eps) if config.qk_norm else None
        self.gate_proj = Linear(d_model, width, bias=False) if config.output_gate else None
        self.sink_logits = nn.Parameter(torch.empty(config.n_heads)) if config.sinks else None
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        """Sinks start at logit 0, below the scores a query usually has, so they take little at first."""
        if self.sink_logits is not None:
            with torch.no_grad():
                self.sink_logits.zero_()

    @property
    def window(self) -> int | None:
        """Keys each query attends to, itself included (None: all): the `window` option, which
        `set_window` changes at run time."""
        return getattr(self.options, "window", None)

    @window.setter
    def window(self, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__}.window is set by layerzoo.set_window(model, {value!r}), "
                             "which also updates the model's options and config")

    @classmethod
    def options_from_attention(cls, teacher: TeacherAttention) -> dict[str, Any]:
        """The teacher layer's shape: its heads, RoPE, biases, qk-norm and score scale."""
        return {key: teacher.options[key] for key in ("n_heads", "n_kv_heads", "head_dim", "rope_theta", "qkv_bias",
                                                      "qk_norm", "qk_norm_eps", "score_scale")}

    def init_from_attention(self, attention: CausalAttention) -> None:
        """Every tensor the two layers share (an output gate or sinks the teacher lacks keep their own init)."""
        theirs = dict(attention.named_parameters())
        for name, tensor in self.named_parameters():
            if name in theirs:
                tensor.copy_(theirs[name])

    def head_projections(self) -> tuple[torch.Tensor, ...]:
        """q_proj's weight (H D, d), k's and v's expanded to the H query heads (H D, d) each, as
        grouped-query attention shares them (query head h reads key/value head h // (H / Hkv)),
        and out_proj's (d, H D)."""
        group = self.n_heads // self.n_kv_heads
        k, v = self.kv_proj.weight.unflatten(0, (2, self.n_kv_heads, self.head_dim))
        k, v = (heads.repeat_interleave(group, dim=0).flatten(0, 1) for heads in (k, v))
        return self.q_proj.weight, k, v, self.out_proj.weight

    def mix(self, x: torch.Tensor, state: KVCache | None, cu_seqlens: torch.Tensor | None):
        if cu_seqlens is None and (state is None or state.lengths is None):
            return self._mix_rows(x, state)
        if cu_seqlens is None:
            return self._mix_ragged_rows(x, state)
        return self._mix_packed(x, state, cu_seqlens)

    def project(self, x: torch.Tensor, positions: torch.Tensor):
        """x (B, T, d_model) at positions ((B, T) or (T,)) -> q (B, T, n_heads, head_dim), and k,
        v (B, T, n_kv_heads, head_dim), with RoPE applied to q and k."""
        batch, length, _ = x.shape
        q = self.q_proj(x).view(batch, length, self.n_heads, self.head_dim)
        k, v = self.kv_proj(x).view(batch, length, 2, self.n_kv_heads, self.head_dim).unbind(2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        return *self.rotary.rotate_all((q, k), positions), v

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, cu_seqlens: torch.Tensor | None = None,
               cu_seqlens_k: torch.Tensor | None = None) -> torch.Tensor:
        """The heads' outputs (B, Tq, n_heads, head_dim) of queries q (B, Tq, n_heads, head_dim)
        that are the last Tq of the keys' positions, over k, v (B, Tk, n_kv_heads, head_dim); with
        cu_seqlens and cu_seqlens_k (B = 1), each packed sequence's queries the last of its keys."""
        return sliding_window_attention(q, k, v, self.window, scale=self.score_scale, backend=self.backend,
                                        cu_seqlens=cu_seqlens, cu_seqlens_k=cu_seqlens_k, sinks=self.sink_logits)

    def _mix_rows(self, x: torch.Tensor, state: KVCache | None):
        """Rows of equal length over histories of equal length: the common, rectangular case."""
        batch, length, _ = x.shape
        start = torch.zeros(batch, dtype=torch.long, device=x.device) if state is None else state.position
        steps = torch.arange(length, device=x.device)
        q, k, v = self.project(x, steps if state is None else start[:, None] + steps)
        (k, kept_k), (v, kept_v) = self._extend(state, k, v)
        y = self.attend(q, k, v)
        if recording():
            record(lambda: sliding_window_attention_weights(q, k, self.window, self.score_scale, sinks=self.sink_logits))
        return self.heads_output(x, y), KVCache(kept_k, kept_v, None, start + length)

    def _mix_ragged_rows(self, x: torch.Tensor, state: KVCache):
        """Rows of equal length T over histories of state.lengths keys each (right-aligned in the
        cache's rows): the new keys are appended to the rows, and the rows attend as packed
        sequences in which each row's unused columns in front are a sequence of their own without
        queries, so no key is gathered or moved (a padded batch's decoding step)."""
        batch, length, _ = x.shape
        q, k, v = self.project(x, state.position[:, None] + torch.arange(length, device=x.device))
        (k, kept_k), (v, kept_v) = self._extend(state, k, v)
        width, seen = k.shape[1], state.lengths + length
        queries = torch.stack((torch.zeros_like(seen), torch.full_like(seen, length)), dim=1).flatten()
        cu_seqlens, cu_seqlens_k = offsets_of(queries), offsets_of(torch.stack((width - seen, seen), dim=1).flatten())
        q, k_packed, v_packed = (t.reshape(1, -1, *t.shape[2:]) for t in (q, k, v))
        if recording():
            record(lambda: self._sequence_weights(q[0], k_packed[0], cu_seqlens, cu_seqlens_k)[1::2])
        y = sliding_window_attention(q, k_packed, v_packed, self.window, scale=self.score_scale, backend=self.backend,
                                     cu_seqlens=cu_seqlens, cu_seqlens_k=cu_seqlens_k, sinks=self.sink_logits)
        keep = seen.clamp(max=kept_k.shape[1])
        lengths = keep if bool((keep != kept_k.shape[1]).any()) else None
        cache = KVCache(kept_k, kept_v, lengths, state.position + length)
        return self.heads_output(x, y.view(batch, length, *y.shape[2:])), cache

    def _mix_packed(self, x: torch.Tensor, state: KVCache | None, cu_seqlens: torch.Tensor):
        """x (1, total, d_model) packing N sequences, each continuing its stream of the state."""
        streams = len(cu_seqlens) - 1
        new = lengths_of(cu_seqlens)
        start = torch.zeros(streams, dtype=torch.long, device=x.device) if state is None else state.position
        q, k, v = self.project(x, positions_in_sequences(cu_seqlens, start)[None])
        k, v = k[0], v[0]
        if state is None:
            cached = torch.zeros_like(new)
        else:
            cached = torch.full_like(new, state.k.shape[1]) if state.lengths is None else state.lengths
            k = concat_sequences(last_of_rows(state.k.to(k.dtype), cached), cached, k, new)
            v = concat_sequences(last_of_rows(state.v.to(v.dtype), cached), cached, v, new)
        seen = cached + new
        if recording():
            record(lambda: self._sequence_weights(q[0], k, cu_seqlens, offsets_of(seen)))
        y = sliding_window_attention(q, k[None], v[None], self.window, scale=self.score_scale, backend=self.backend,
                                     cu_seqlens=cu_seqlens, cu_seqlens_k=offsets_of(seen), sinks=self.sink_logits)
        keep = seen if self.window is None else seen.clamp(max=self.window - 1)
        lengths = keep if len(keep) and bool((keep != keep.max()).any()) else None
        cache = KVCache(right_aligned(k, seen, keep), right_aligned(v, seen, keep), lengths, start + new)
        return self.heads_output(x, y), cache

    def _sequence_weights(self, q: torch.Tensor, k: torch.Tensor, cu_seqlens: torch.Tensor,
                          cu_seqlens_k: torch.Tensor) -> list[torch.Tensor]:
        """Each packed sequence's attention weights (H, its queries, its keys: cached, then new),
        from q (total, H, D) and k (total keys, Hkv, D) at the offsets cu_seqlens and cu_seqlens_k."""
        return [sliding_window_attention_weights(q[q_start:q_end][None], k[k_start:k_end][None], self.window,
                                                 self.score_scale, sinks=self.sink_logits)[0]
                for q_start, q_end, k_start, k_end in zip(cu_seqlens[:-1].tolist(), cu_seqlens[1:].tolist(),
                                                          cu_seqlens_k[:-1].tolist(), cu_seqlens_k[1:].tolist())]

    def heads_output(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """The layer's output (B, T, d_model) from its input x and the heads' outputs y (B, T, n_heads, head_dim)."""
        y = y.flatten(2)
        if self.gate_proj is not None:
            y = y * torch.sigmoid(self.gate_proj(x))
        return self.out_proj(y)

    def _extend(self, state: KVCache | None, k: torch.Tensor, v: torch.Tensor):
        """((every key, the kept ones), (every value, the kept ones)): the state's followed by this
        call's k, v (B, T, n_kv_heads, head_dim); kept: what the next call can still attend to."""
        keep = None if self.window is None else self.window - 1
        cached = (None, None) if state is None else (state.k, state.v)
        return extend(cached[0], k, keep), extend(cached[1], v, keep)

    def init_state(self, batch_size: int) -> KVCache:
        """The empty KVCache for `batch_size` streams.

        Args:
            batch_size: streams N the cache holds.

        Returns:
            KVCache with k, v (N, 0, n_kv_heads, head_dim) in the weights' dtype, lengths None and
                position (N,) int64 zeros. A call returns k, v (N, L, n_kv_heads, head_dim) keys (after
                RoPE) and values: every token seen for full attention, the last window - 1 for SWA.
        """
        weight = self.q_proj.weight
        empty = weight.new_zeros(batch_size, 0, self.n_kv_heads, self.head_dim)
        return KVCache(empty, empty.clone(), None, torch.zeros(batch_size, dtype=torch.long, device=weight.device))

    def state_size(self, seq_len: int) -> int:
        """Elements per stream after `seq_len` tokens: keys and values kept, and the position.

        Args:
            seq_len: tokens the stream has seen.

        Returns:
            2 * kept * n_kv_heads * head_dim + 1, kept = seq_len (full attention) or
                min(seq_len, window - 1) (SWA).
        """
        kept = seq_len if self.window is None else min(seq_len, self.window - 1)
        return 2 * kept * self.n_kv_heads * self.head_dim + 1  # + the position


# The registry-wide checks run attention with heads of their own width (6: wider than d_model
# // n_heads at the checks' small widths), q/k/v biases, qk-norm and a score scale of its own
# (Qwen2's, Qwen3's and Gemma-3's layers).
@register_mixer("attention", test_options={"n_heads": 4, "n_kv_heads": 2, "head_dim": 6, "qkv_bias": True, "qk_norm": True,
                                           "score_scale": 0.3})
class Attention(CausalAttention):
    """Full causal multi-head attention with grouped KV heads, RoPE, optional qk-norm, gate, sinks.

    Shapes: x (B, T, d_model) -> (B, T, d_model). The streaming state is a KVCache of every token seen.

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers attention`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: head_dim (given, or d_model // n_heads) is odd or d_model does not divide by
            n_heads; n_heads does not divide by n_kv_heads; sinks on a backend without them.
    """

    layer_type = "full_attention"


# The registry-wide checks run swa with the output gate and sinks, attention without them.
@register_mixer("swa", test_options={"n_heads": 4, "n_kv_heads": 2, "window": 5, "output_gate": True, "sinks": True})
class SlidingWindowAttention(CausalAttention):
    """Sliding-window causal attention: token t attends to tokens t-window+1 .. t.

    `layerzoo.set_window(model, w)` changes the window of every SWA layer in a model at run time,
    without a rebuild (stochastic window training, evaluation at another window). The streaming
    state keeps the last window-1 keys/values, so decoding runs in constant memory; after widening
    the window mid-stream, only what the old state kept is visible.

    Args:
        d_model: width of the input and output.
        **options: its options by keyword, each left out at its default: `layerzoo mixers swa`
            prints them, and docs/mixers.md tables them.

    Raises:
        OptionError: head_dim (given, or d_model // n_heads) is odd or d_model does not divide by
            n_heads; n_heads does not divide by n_kv_heads; sinks on a backend without them.
    """

    layer_type = "sliding_attention"
    Options = SlidingWindowOptions
    defaults_from_attention = (*CausalAttention.defaults_from_attention, "window")  # a SWA teacher's window


def sliding_window_layers(model: nn.Module) -> list[SlidingWindowAttention]:
    """Every sliding-window attention layer inside `model`, in module order."""
    return [module for module in model.modules() if isinstance(module, SlidingWindowAttention)]
