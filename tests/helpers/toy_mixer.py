"""A user's mixer for the mutation tests, on the toy kernel (toy_kernel.py), each bug of BUGS
plantable: `toy_mixer(bugs)` is the class with those bugs, registered nowhere.

q, k, v and a log decay per head g = logsigmoid(W_g x) from the input; the kernel's output
projected back to d_model. The state is the kernel's (S in fp32), so the mixer streams in
constant memory; packed sequences go to the kernel whole (packs_sequences).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

import layerzoo
from layerzoo.kernels.common.dtypes import compute_dtype

from .toy_kernel import toy_chunkwise, toy_reference

# The bugs a mixer plausibly has, each one a mutant check_mixer must catch.
BUGS = {
    "decoding": "a one-token call after a longer piece skips the decay",
    "low precision": "computes in bf16 inside an fp32 call",
    "state_size(0)": "state_size(0) says 0 where an empty state holds S",
    "init_state dtype": "init_state gives S in the model's dtype, a call returns it in fp32",
    "future": "each output sees the next token",
    "cu_seqlens": "packed sequences run on as one",
    "state on the module": "state=None continues from the last call's state, kept on the module",
    "batch": "each output depends on the other rows (a batch mean)",
    "gradient": "the decay's projection gets no gradient",
    "empty calls": "a call without tokens forgets the state",
    "output dtype": "a bf16 call returns fp32",
    "streaming": "a call of several tokens ignores the state it is given",
}


@dataclass
class ToyState:
    """S: (B, H, K, V), fp32 (fp64 for fp64 models)."""

    S: torch.Tensor


class ToyMixer(layerzoo.Mixer):
    """Linear attention with a learned decay per head (the toy kernel), as a mixer."""

    @dataclass(frozen=True)
    class Options(layerzoo.MixerOptions):
        n_heads: int = layerzoo.option(2, min=1, help="heads")
        chunk_size: int = layerzoo.option(4, min=1, help="chunk length of the chunkwise kernel")
        backend: str = layerzoo.option("auto", choices=("auto", "reference", "chunkwise"), help="the toy kernel backend")

        def check(self, d_model: int) -> None:
            if d_model % self.n_heads:
                raise layerzoo.OptionError("n_heads", f"d_model {d_model} is not divisible by n_heads {self.n_heads}")

    packs_sequences = True
    bugs: frozenset[str] = frozenset()

    def __init__(self, d_model: int, **options: Any):
        super().__init__(d_model, **options)
        self.n_heads, self.head_dim = self.options.n_heads, d_model // self.options.n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.decay = nn.Linear(d_model, self.n_heads)
        self.out = nn.Linear(d_model, d_model, bias=False)

    def inputs(self, x: torch.Tensor):
        """q, k, v (B, T, H, D) and g (B, T, H) from x (B, T, d_model)."""
        q, k, v = self.qkv(x).unflatten(-1, (3, self.n_heads, self.head_dim)).unbind(2)
        g = F.logsigmoid(self.decay(x).to(compute_dtype(x.dtype)))
        return q, k, v, g.detach() if "gradient" in self.bugs else g

    def mix(self, x: torch.Tensor, state: ToyState | None, cu_seqlens: torch.Tensor | None):
        bugs = self.bugs
        if "state on the module" in bugs and state is None:
            state = getattr(self, "last_state", None)
        if "streaming" in bugs and x.shape[1] > 1:
            state = None
        q, k, v, g = self.inputs(x)
        if "decoding" in bugs and x.shape[1] == 1 and state is not None:
            g = torch.zeros_like(g)
        if "low precision" in bugs and x.dtype == torch.float32:
            q, k, v, g = (t.to(torch.bfloat16) for t in (q, k, v, g))
        initial = None if state is None else state.S
        if self.options.backend == "reference" or (self.options.backend == "auto" and x.shape[1] == 1 and cu_seqlens is None):
            o, S = toy_reference(q, k, v, g, initial_state=initial)
        else:
            o, S = toy_chunkwise(q, k, v, g, initial_state=initial, chunk_size=self.options.chunk_size,
                                 cu_seqlens=None if "cu_seqlens" in bugs else cu_seqlens)
            if "cu_seqlens" in bugs and cu_seqlens is not None:  # the states of the sequences read at their ends
                S = torch.cat([toy_chunkwise(*(t[:, :end] for t in (q, k, v, g)), initial_state=initial,
                                             chunk_size=self.options.chunk_size)[1][:1] for end in cu_seqlens[1:].tolist()])
        y = self.out(o.to(x.dtype).flatten(2))
        if "future" in bugs:
            y = y + 1e-2 * F.pad(x[:, 1:], (0, 0, 0, 1))
        if "batch" in bugs:
            y = y - 1e-2 * y.mean(0, keepdim=True)
        new_state = ToyState(S)
        if "empty calls" in bugs and x.shape[1] == 0:
            new_state = self.init_state(S.shape[0])
        if "state on the module" in bugs:
            self.last_state = new_state
        return (y.float() if "output dtype" in bugs else y), new_state

    def init_state(self, batch_size: int) -> ToyState:
        weight = self.qkv.weight
        dtype = weight.dtype if "init_state dtype" in self.bugs else compute_dtype(weight.dtype)
        return ToyState(torch.zeros(batch_size, self.n_heads, self.head_dim, self.head_dim, dtype=dtype, device=weight.device))

    def state_size(self, seq_len: int) -> int:
        if "state_size(0)" in self.bugs and seq_len == 0:
            return 0
        return self.n_heads * self.head_dim * self.head_dim


def toy_mixer(bugs: frozenset[str] = frozenset()) -> type[ToyMixer]:
    """ToyMixer with `bugs` planted (see BUGS)."""
    return type(f"ToyMixer[{', '.join(sorted(bugs)) or 'no bug'}]", (ToyMixer,), {"bugs": frozenset(bugs)})


def toy_dense(mixer: ToyMixer, x: torch.Tensor) -> torch.Tensor:
    """What the toy mixer computes, written apart from its code: the step loop on its projections."""
    q, k, v = mixer.qkv(x).unflatten(-1, (3, mixer.n_heads, mixer.head_dim)).unbind(2)
    g = F.logsigmoid(mixer.decay(x).to(compute_dtype(x.dtype)))
    o, _ = toy_reference(q, k, v, g)
    return mixer.out(o.to(x.dtype).flatten(2))
