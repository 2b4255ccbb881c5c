"""The contract every token mixer follows (docs/contract.md): `Cls(d_model, **options)`, its
options the fields of its `Options`; `y = mixer(x)` and `y, state = mixer(x, state,
return_state=True)` on (B, T, d_model), any split of a sequence into pieces equal to one call;
padded and packed batches handled here, once for every mixer; states returned, never kept on the
module.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from ..blocks.packing import Packing, check_packed, lengths_of
from ..errors import OptionError
from ..options import Section, declared
from ..registry import read_options
from .inputs import check_state_streams, check_x
from .states import concat_streams, select_streams


@dataclass(frozen=True)
class MixerOptions(Section):
    """Base of a mixer's options: a frozen dataclass of `option(...)` fields, each value checked
    against its field when made; `check(d_model)` checks the combinations."""

    def check(self, d_model: int) -> None:
        """Raise OptionError(key, message) for options that cannot build a mixer of width d_model
        (d_model not divisible by n_heads...); allocates nothing, so a spec is checked without
        building its model.

        Args:
            d_model: the width the mixer would be built at.

        Raises:
            OptionError: the options cannot go together at this width; its key names the option.
        """


class OptionsSignature:
    """`inspect.signature` of a mixer class (help(), notebooks, IDEs): d_model, then each declared
    option as a keyword with its default. Instances have no such attribute: their signature is forward's."""

    def __get__(self, instance: Any, owner: type[Mixer]) -> inspect.Signature:
        if instance is not None:
            raise AttributeError("__signature__")
        parameters = [inspect.Parameter("d_model", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=int)]
        for info in declared(owner.Options).values():
            default = inspect.Parameter.empty if info.required else info.default
            parameters.append(inspect.Parameter(info.name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                                annotation=info.annotation))
        return inspect.Signature(parameters)


class Mixer(nn.Module):
    """Base class of token mixers. Subclasses implement `mix`, `init_state`, `state_size`; the
    base class's `forward` turns a padded batch into packed sequences for them. A target of
    `layerzoo convert` also defines `options_from_attention` and `init_from_attention`
    (mixers/from_attention.py).

    Args:
        d_model: the width of the input and output, a positive int.
        **options: the fields of the class's `Options`, by name, each left out at its default;
            kept, checked, as `mixer.options`.

    Raises:
        OptionError: d_model is not a positive int, an option is unknown (the message names the
            closest), a required one is missing, a value is out of its range, or the options
            cannot go together at this d_model (`Options.check`).
    """

    registry_name: str = ""
    # What hybrid models' configs call such a layer (transformers' `layer_types`: "full_attention",
    # "sliding_attention", "linear_attention" for every recurrent one); empty: the registered name.
    layer_type: ClassVar[str] = ""
    Options: ClassVar[type[MixerOptions]] = MixerOptions
    __signature__ = OptionsSignature()

    def __init__(self, d_model: int, **options: Any):
        super().__init__()
        if not isinstance(d_model, int) or isinstance(d_model, bool) or d_model <= 0:
            raise OptionError("d_model", f"d_model must be a positive integer, got {d_model!r}")
        self.d_model = d_model
        self.options = read_options(type(self), options)
        self.options.check(d_model)

    def forward(self, x: torch.Tensor, state: Any = None, return_state: bool = False, *,
                cu_seqlens: torch.Tensor | None = None, attention_mask: torch.Tensor | None = None):
        """x: (B, T, d_model) -> y: (B, T, d_model), or (y, new_state) if return_state.

        Args:
            x: (B, T, d_model) floating-point input in the weights' dtype (fp32 or bf16; fp64
                too, as the reference checks run it); any B, T >= 0.
            state: the state a previous call returned for these sequences (one row per sequence,
                batch first: the mixer's own dataclass, see its `init_state`), or None for the
                empty state.
            return_state: also return the state after the last token.
            cu_seqlens: (N + 1,) int32 / int64 offsets [0, l1, l1 + l2, ..., T] of N sequences
                packed into x (B = 1), on x's device; nothing crosses a boundary.
            attention_mask: (B, T) of 1 / True at real tokens and 0 / False at padding (anywhere
                in a row); padding changes no state and gets zeros out. Not with cu_seqlens.

        Returns:
            y (B, T, d_model) in x's dtype; with return_state, (y, new_state), the state after
                each sequence's last token, with B rows (N with cu_seqlens), of the same structure as
                `init_state`'s.

        Raises:
            ValueError: (one line, before any work) x is not a floating-point (B, T, d_model)
                tensor; the state's rows do not match the sequences; cu_seqlens or attention_mask
                is malformed, or both are given.
        """
        op = type(self).__name__
        check_x(op, x, self.d_model)
        packing = None
        if attention_mask is not None:
            if cu_seqlens is not None:
                raise ValueError(f"{op}: pass cu_seqlens or attention_mask, not both")
            packing = Packing.from_mask(attention_mask, x.shape[:2])
            check_state_streams(op, state, x.shape[0], f"x has {x.shape[0]} rows")
            x, cu_seqlens = packing.pack(x), packing.cu_seqlens
        elif cu_seqlens is not None:
            check_packed(op, cu_seqlens, x)
            check_state_streams(op, state, len(cu_seqlens) - 1, f"cu_seqlens has {len(cu_seqlens) - 1}")
        else:
            check_state_streams(op, state, x.shape[0], f"x has {x.shape[0]} rows")
        if cu_seqlens is None or self.packs_sequences:
            y, new_state = self.mix(x, state, cu_seqlens)
        else:
            y, new_state = self.mix_each_sequence(x, state, cu_seqlens)
        if packing is not None:
            y = packing.unpack(y)
        return (y, new_state) if return_state else y

    # Whether `mix` takes cu_seqlens itself; if not, packed sequences run one at a time through it.
    packs_sequences: bool = False

    def mix(self, x: torch.Tensor, state: Any, cu_seqlens: torch.Tensor | None) -> tuple[torch.Tensor, Any]:
        """x: (B, T, d_model), state or None (empty) -> (y (B, T, d_model), new state).

        Args:
            x: (B, T, d_model), already checked by `forward`.
            state: the state to continue, or None (empty).
            cu_seqlens: None, or (only where the class sets packs_sequences) the validated (N + 1,)
                offsets of N sequences packed into x (B = 1); the state then has N rows.

        Returns:
            The pair (y, new_state): y (B, T, d_model) in x's dtype; the state after the last token.
        """
        raise NotImplementedError

    def mix_each_sequence(self, x: torch.Tensor, state: Any, cu_seqlens: torch.Tensor) -> tuple[torch.Tensor, Any]:
        """N sequences packed into x (1, T, d_model), each through `mix` on its own stream of the
        state: any mixer's variable-length path, one call per sequence."""
        streams = len(cu_seqlens) - 1
        state = self.init_state(streams) if state is None else state
        if streams == 0:
            return x, state
        results = [self.mix(piece, select_streams(state, n, n + 1), None)
                   for n, piece in enumerate(x.split(lengths_of(cu_seqlens).tolist(), dim=1))]
        return torch.cat([y for y, _ in results], dim=1), concat_streams([s for _, s in results])

    def init_state(self, batch_size: int) -> Any:
        """The empty state for `batch_size` sequences, on this module's device.

        Args:
            batch_size: sequences (rows) the state holds, >= 0.

        Returns:
            The state a call from no state starts from (`state=None` means the same): the
                mixer's own dataclass of batch-first tensors.
        """
        raise NotImplementedError

    def state_size(self, seq_len: int) -> int:
        """Number of state elements per sequence after `seq_len` tokens.

        Args:
            seq_len: tokens the sequence has seen, >= 0.

        Returns:
            The elements of all the state's tensors, per sequence; never decreasing in seq_len
                (constant for the recurrent mixers).
        """
        raise NotImplementedError
