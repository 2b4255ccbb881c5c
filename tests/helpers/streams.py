"""What the recurrent mixers' own tests share: drawing small Gated DeltaNet-shaped layers, and
chunked prefill followed by token-by-token decoding against one full call."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from layerzoo.testing import assert_close, prefill_then_decode, run_in_pieces


@st.composite
def delta_rule_layers(draw, cls: type, d_model: int = 16, use_short_conv: bool | None = None):
    """A small Gated DeltaNet or Kimi Delta Attention (their options are the same), seeded;
    use_short_conv None: drawn."""
    torch.manual_seed(draw(st.integers(0, 2**31 - 1)))
    return cls(
        d_model,
        n_heads=draw(st.integers(1, 3)),
        head_dim=draw(st.sampled_from([4, 8])),
        expand_v=draw(st.sampled_from([1.0, 1.5, 2.0])),
        use_short_conv=draw(st.booleans()) if use_short_conv is None else use_short_conv,
        conv_size=draw(st.integers(1, 4)),
        chunk_size=draw(st.sampled_from([4, 16, 64])),
    )


@st.composite
def delta_rule_layers_off_init(draw, cls: type, d_model: int = 16):
    """delta_rule_layers with short convolutions, the output norm's weight and dt_bias drawn away
    from their constant inits (so that a mapping that swaps or reshapes them shows)."""
    mixer = draw(delta_rule_layers(cls, d_model, use_short_conv=True))
    with torch.no_grad():
        mixer.o_norm.weight.uniform_(0.5, 1.5)
        mixer.dt_bias.normal_()
    return mixer


def check_prefill_then_decode(mixer: torch.nn.Module, x: torch.Tensor, data) -> None:
    """A drawn prefill of x read in drawn pieces, then the rest one token at a time, equals one call."""
    length = x.shape[1]
    prefill = data.draw(st.integers(0, length))
    piece = data.draw(st.integers(1, max(prefill, 1)))
    with torch.no_grad():
        full = mixer(x)
        streamed, _ = run_in_pieces(mixer, x, prefill_then_decode(length, prefill, piece))
    assert_close(streamed, full, what=f"prefill {prefill} in pieces of {piece}, then decode", scale=10)
