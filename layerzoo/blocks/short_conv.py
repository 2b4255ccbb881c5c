"""Depthwise short causal convolution with a streaming state: the last width - 1 inputs.

Three implementations of one operation, chosen per call:
- "causal_conv1d" (Dao-AILab's CUDA kernels): the fastest on CUDA for widths 2 to 4, with the
  activation fused; an optional package (the `cuda` extra, it only builds where CUDA is), so it is
  imported on first use and its absence is never an error.
- "fla" (flash-linear-attention's Triton `causal_conv1d`, the `cuda` extra): any width, states and
  their gradients included. The CUDA fallback.
- "torch" (grouped `F.conv1d` over [state; x]): CPU and fp64. Triton does not run on CPU, and on
  CPU a grouped convolution over a few taps is cheap next to the projections around it.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F
from torch import nn

from ..errors import unknown_name_message
from ..kernels.common import installed

CONV_BACKENDS = ("torch", "fla", "causal_conv1d")
ACTIVATIONS = ("silu", None)


@functools.cache
def _dao_causal_conv1d():
    """causal_conv1d.causal_conv1d_fn, or None when the optional package is missing or broken."""
    try:
        from causal_conv1d import causal_conv1d_fn
    except (ImportError, OSError):  # OSError: built against another CUDA or torch
        return None
    return causal_conv1d_fn


def _torch_conv(x, state, weight, bias, activation):
    padded = torch.cat((state, x), dim=1)
    y = F.conv1d(padded.transpose(1, 2), weight[:, None, :], bias, groups=weight.shape[0]).transpose(1, 2)
    if activation == "silu":
        y = F.silu(y)
    # clone: a view would keep the whole padded input alive in the state
    return y, padded[:, padded.shape[1] - state.shape[1]:].clone()


def _fla_conv(x, state, weight, bias, activation):
    from fla.modules.causal_conv1d import causal_conv1d

    # fla's cache holds the last `width` inputs and never reads the oldest; ours holds width - 1.
    cache = F.pad(state.transpose(1, 2), (1, 0))
    y, final = causal_conv1d(
        x, weight, bias, initial_state=cache, output_final_state=True, activation=activation, backend="triton"
    )
    return y, final[..., 1:].transpose(1, 2)


def _dao_conv(x, state, weight, bias, activation):
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


_IMPLEMENTATIONS = {"torch": _torch_conv, "fla": _fla_conv, "causal_conv1d": _dao_conv}


def choose_conv_backend(x: torch.Tensor, width: int, backend: str = "auto") -> str:
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
    call. `backend` is "auto" (see choose_conv_backend) or one of CONV_BACKENDS.
    """

    def __init__(self, channels: int, width: int = 4, activation: str | None = "silu", bias: bool = False,
                 backend: str = "auto"):
        super().__init__()
        if width < 1:
            raise ValueError(f"ShortConvolution: width must be >= 1, got {width}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"ShortConvolution: activation must be one of {ACTIVATIONS}, got {activation!r}")
        self.channels, self.width, self.activation, self.backend = channels, width, activation, backend
        self.weight = nn.Parameter(torch.empty(channels, width))
        self.bias = nn.Parameter(torch.empty(channels)) if bias else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Conv1d's default for a depthwise kernel: U(-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in = width.
        bound = 1 / math.sqrt(self.width)
        nn.init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            nn.init.uniform_(self.bias, -bound, bound)

    def init_state(self, batch_size: int, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Zeros (B, width - 1, channels): the state at the start of a sequence."""
        return self.weight.new_zeros(batch_size, self.width - 1, self.channels, dtype=dtype)

    def forward(self, x: torch.Tensor, state: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """x: (B, T, channels), state: (B, width - 1, channels) or None -> (y, new_state)."""
        state = self.init_state(x.shape[0], x.dtype) if state is None else state.to(x.dtype)
        name = choose_conv_backend(x, self.width, self.backend)
        if x.shape[1] == 0:  # nothing to convolve (the kernels need a window's worth): state unchanged
            return x.new_zeros(x.shape), state
        return _IMPLEMENTATIONS[name](x, state, self.weight, self.bias, self.activation)

    def extra_repr(self) -> str:
        return f"{self.channels}, width={self.width}, activation={self.activation}, bias={self.bias is not None}"
