"""Depthwise short causal convolution with a streaming state: the last width - 1 inputs.

Three implementations of one operation, chosen per call:
- "causal_conv1d" (Dao-AILab's CUDA kernels): the fastest on CUDA for widths 2 to 4, with the
  activation fused; an optional package (the `cuda` extra, it only builds where CUDA is), so it is
  imported on first use and its absence is never an error.
- "fla" (flash-linear-attention's Triton `causal_conv1d`, the `cuda` extra): any width, states and
  their gradients included. The CUDA fallback.
- "torch" (grouped `F.conv1d` over [state; x]): CPU and fp64. Triton does not run on CPU, and on
  CPU a grouped convolution over a few taps is cheap next to the projections around it.

Packed sequences (cu_seqlens, B = 1): the convolution restarts at every sequence, from its own
state row. "torch" convolves all the sequences at once, each behind its own state; "fla" takes
them natively; "causal_conv1d" takes them (as seq_idx) only from the empty state, since its
kernels then neither read initial states nor return final states: the final states are gathered
from the inputs, and a call with a state runs "torch" instead.
"""

from __future__ import annotations

import functools

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import unknown_name_message
from ..kernels.common.backends import installed
from ..kernels.common.checks import check_cu_seqlens
from ..kernels.common.dtypes import compute_dtype
from .meta import reset_unless_meta
from .projections import current_projection_init
from ..kernels.common.sequences import without_empty_sequences

CONV_BACKENDS = ("torch", "fla", "causal_conv1d")
ACTIVATIONS = ("silu", None)
FEW_TOKENS = 16  # up to this many, "torch" multiplies the windows out (B, T, channels, width) instead


@functools.cache
def _dao_causal_conv1d():
    """causal_conv1d.causal_conv1d_fn, or None when the optional package is missing or broken."""
    try:
        from causal_conv1d import causal_conv1d_fn
    except (ImportError, OSError):  # OSError: built against another CUDA or torch
        return None
    return causal_conv1d_fn


def _torch_conv(x, state, weight, bias, activation, bounds=None):
    if bounds is not None:
        return _packed_torch_conv(x, state, weight, bias, activation, bounds)
    padded = torch.cat((state, x), dim=1)
    y = _convolve(padded, weight, bias, activation)
    # clone: a view would keep the whole padded input alive in the state
    return y, padded[:, padded.shape[1] - state.shape[1]:].clone()


def _convolve(padded, weight, bias, activation):
    """(B, width - 1 + T, channels) -> (B, T, channels): the depthwise convolution without padding."""
    width = weight.shape[1]
    if padded.shape[1] - width < FEW_TOKENS and not torch.is_autocast_enabled(padded.device.type):
        # A decoding step: a grouped conv1d's set-up costs several times the few products it makes.
        # Products and sums in fp32 (fp64 for fp64), rounded once, as conv1d rounds; under autocast
        # conv1d runs, so that autocast decides the precision of every call alike.
        dtype = compute_dtype(padded.dtype)
        y = (padded.unfold(1, width, 1).to(dtype) * weight.to(dtype)).sum(-1)
        return _activated((y if bias is None else y + bias.to(dtype)).to(padded.dtype), activation)
    y = F.conv1d(padded.transpose(1, 2), weight[:, None, :], bias, groups=weight.shape[0]).transpose(1, 2)
    return _activated(y, activation)


def _activated(y, activation):
    return F.silu(y) if activation == "silu" else y


def _packed_torch_conv(x, state, weight, bias, activation, bounds):
    """Every packed sequence behind its own state row, [state_0; x_0; state_1; x_1; ...], in one
    convolution; each sequence keeps the outputs at its own tokens (the windows that straddle two
    sequences are dropped)."""
    rows, keep = state.shape[:2]
    starts, lengths = torch.tensor(bounds[:-1]), torch.tensor(bounds[1:]) - torch.tensor(bounds[:-1])
    # where each state row and each token go in the interleaved layout
    segment = torch.cat((torch.zeros(1, dtype=torch.int64), (lengths + keep).cumsum(0)))[:-1]
    state_places = (segment[:, None] + torch.arange(keep)).flatten()
    sequence = torch.repeat_interleave(torch.arange(rows), lengths)
    token_places = segment[sequence] + keep + torch.arange(bounds[-1]) - starts[sequence]
    order = torch.empty(rows * keep + bounds[-1], dtype=torch.int64)
    order[state_places] = torch.arange(rows * keep)
    order[token_places] = rows * keep + torch.arange(bounds[-1])
    interleaved = torch.cat((state.reshape(1, rows * keep, x.shape[2]), x), dim=1).index_select(1, order.to(x.device))
    y = _convolve(interleaved, weight, bias, activation)
    # the output of the window ending at place p is y[p - keep]
    return y.index_select(1, (token_places - keep).to(x.device)), _last_inputs(x, state, bounds)


def _last_inputs(x, state, bounds):
    """The final state of each packed sequence: the last width - 1 rows of [its state row; its
    tokens] (N, width - 1, channels). x: (1, T, channels), T >= 1; state: (N, width - 1, channels)."""
    keep = state.shape[1]
    lengths = torch.tensor(bounds[1:]) - torch.tensor(bounds[:-1])
    place = lengths[:, None] + torch.arange(keep)  # in [state row; tokens], counted from its start
    from_state = (place < keep).to(x.device)[..., None]
    tokens = (torch.tensor(bounds[:-1])[:, None] + place - keep).clamp(0, x.shape[1] - 1).to(x.device)
    old = state.gather(1, place.clamp(max=max(keep - 1, 0)).to(x.device)[..., None].expand(-1, -1, state.shape[2]))
    return torch.where(from_state, old, x[0, tokens])


def _fla_conv(x, state, weight, bias, activation, bounds=None):
    from fla.modules.causal_conv1d import causal_conv1d

    if bounds is not None and any(end == start for start, end in zip(bounds, bounds[1:])):
        # fla's kernels are not written for sequences without a chunk
        return without_empty_sequences(
            lambda offsets, rows: _fla_conv(x, rows, weight, bias, activation, offsets), bounds, state)
    packed = {}
    if bounds is not None:
        # the host copy spares fla a device sync to find its chunks
        offsets = torch.tensor(bounds, dtype=torch.int64)
        packed = {"cu_seqlens": offsets.to(x.device), "cu_seqlens_cpu": offsets}
    # fla's cache holds the last `width` inputs and never reads the oldest; ours holds width - 1.
    cache = F.pad(state.transpose(1, 2), (1, 0))
    y, final = causal_conv1d(
        x, weight, bias, initial_state=cache, output_final_state=True, activation=activation, backend="triton",
        **packed,
    )
    return y, final[..., 1:].transpose(1, 2)


def _dao_conv(x, state, weight, bias, activation, bounds=None):
    if bounds is not None:
        return _packed_dao_conv(x, state, weight, bias, activation, bounds)
    # Channel-last (B, D, T) views of contiguous (B, T, D) tensors: the layout this kernel needs
    # to take initial states and return final ones.
    y, final = _dao_causal_conv1d()(
        x.contiguous().transpose(1, 2),
        weight,
        bias,
        initial_states=state.contiguous().transpose(1, 2),
        return_final_states=True,
        activation=activation,
    )
    return y.transpose(1, 2), final.transpose(1, 2)


def _packed_dao_conv(x, state, weight, bias, activation, bounds):
    """Packed sequences from the empty state (ShortConvolution.forward sends those with a state
    to "torch"): seq_idx restarts the convolution at each sequence. With seq_idx the kernel
    returns no final states, so they are gathered from the inputs."""
    lengths = torch.tensor(bounds[1:]) - torch.tensor(bounds[:-1])
    seq_idx = torch.repeat_interleave(torch.arange(len(lengths), dtype=torch.int32), lengths)
    y = _dao_causal_conv1d()(
        x.contiguous().transpose(1, 2), weight, bias, seq_idx=seq_idx[None].to(x.device), activation=activation)
    return y.transpose(1, 2), _last_inputs(x, state, bounds)


_IMPLEMENTATIONS = {"torch": _torch_conv, "fla": _fla_conv, "causal_conv1d": _dao_conv}


def choose_short_conv_backend(x: torch.Tensor, width: int, backend: str = "auto") -> str:
    """The implementation a ShortConvolution call on x runs.

    "auto": "torch" off CUDA and for fp64; on CUDA "causal_conv1d" when installed and
    2 <= width <= 4 (its kernels' range), else "fla" when installed, else "torch". Raises
    ValueError for an unknown name or a backend this input cannot run on.
    """
    if backend != "auto" and backend not in CONV_BACKENDS:
        raise ValueError(unknown_name_message("short convolution backend", backend, [*CONV_BACKENDS, "auto"]))
    if backend in ("fla", "causal_conv1d") and not x.is_cuda:
        raise ValueError(f"the {backend!r} short convolution backend needs CUDA tensors, got {x.device}")
    if backend == "causal_conv1d" and _dao_causal_conv1d() is None:
        raise ValueError("the 'causal_conv1d' backend needs the causal-conv1d package (pip install 'layerzoo[cuda]')")
    if backend == "fla" and not installed("fla"):
        raise ValueError("the 'fla' short convolution backend needs flash-linear-attention (pip install 'layerzoo[cuda]')")
    if backend != "auto":
        return backend
    if not x.is_cuda or x.dtype == torch.float64:
        return "torch"
    if 2 <= width <= 4 and _dao_causal_conv1d() is not None:
        return "causal_conv1d"
    return "fla" if installed("fla") else "torch"



class ShortConvolution(nn.Module):
    """Depthwise causal convolution over time, optionally followed by SiLU.

    y_t = act(bias + sum_i weight[:, i] * x_{t - width + 1 + i}), channel by channel.
    x: (B, T, channels) -> y: (B, T, channels) in x's dtype. The streaming state is
    (B, width - 1, channels) in x's dtype: the last width - 1 inputs, oldest first; None is the
    start of a sequence (zeros). Any split of a sequence, the state threaded through, equals one
    call. `backend` is "auto" (see choose_short_conv_backend) or one of CONV_BACKENDS.

    Packed sequences (cu_seqlens, fla's convention): x (1, T, channels) holds N sequences one
    after another, and the states hold a row per sequence (N, width - 1, channels); each sequence
    is convolved as if alone, from its own state row (a sequence shorter than width - 1 keeps the
    older part of that row in its final state, zeros from the empty state).
    Weights are drawn by the projection rule in force at construction (blocks/projections.py).
    """

    def __init__(self, channels: int, width: int = 4, activation: str | None = "silu", bias: bool = False,
                 backend: str = "auto"):
        super().__init__()
        if width < 1:
            raise ValueError(f"ShortConvolution: width must be >= 1, got {width}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"ShortConvolution: activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.channels, self.width, self.activation, self.backend = channels, width, activation, backend
        self.init = current_projection_init()
        self.weight = nn.Parameter(torch.empty(channels, width))
        self.bias = nn.Parameter(torch.empty(channels)) if bias else None
        reset_unless_meta(self)

    def reset_parameters(self) -> None:
        self.init.draw(self.weight, self.bias, fan_in=self.width)  # a depthwise kernel's fan-in

    def init_state(self, batch_size: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Zeros (B, width - 1, channels): the state at the start of a sequence."""
        return self.weight.new_zeros(batch_size, self.width - 1, self.channels, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None, cu_seqlens: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (B, T, channels), state: (B, width - 1, channels) or None -> (y, new_state).

        cu_seqlens: None, or the offsets [0, l1, l1 + l2, ..., T] of packed sequences (a 1-D
        int32/int64 tensor on x's device; B = 1): then state and new_state are (N, width - 1,
        channels), N = len(cu_seqlens) - 1.
        """
        sizes = {"B": x.shape[0], "T": x.shape[1]} | ({} if state is None else {"N": state.shape[0]})
        bounds = check_cu_seqlens("ShortConvolution", cu_seqlens, sizes, x.device)
        name = choose_short_conv_backend(x, self.width, self.backend)
        if bounds is not None and name == "causal_conv1d" and state is not None:
            name = "torch"  # its kernels take packed sequences (seq_idx) only without initial states
        rows = x.shape[0] if bounds is None else len(bounds) - 1
        state = self.init_state(rows, x.dtype) if state is None else state.to(x.dtype)
        if x.shape[1] == 0:  # nothing to convolve (the kernels need a window's worth): state unchanged
            return x.new_zeros(x.shape), state
        packed = {} if bounds is None else {"bounds": bounds}
        return _IMPLEMENTATIONS[name](x, state, self.weight, self.bias, self.activation, **packed)

    def extra_repr(self) -> str:
        return f"{self.channels}, width={self.width}, activation={self.activation}, bias={self.bias is not None}"
