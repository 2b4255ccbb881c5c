"""The attention mixers' output gate and sinks (the registry-wide contract checks run swa with both)."""

import pytest
import torch

from layerzoo.errors import OptionError
from layerzoo.mixers.attention import Attention, SlidingWindowAttention
from layerzoo.testing import check_mixer


def test_full_attention_with_gate_and_sinks_meets_the_contract():
    check_mixer("attention", n_heads=4, n_kv_heads=2, output_gate=True, sinks=True)


def pair(cls, **options):
    """The layer with and without `options`, sharing every weight the plain one has."""
    torch.manual_seed(0)
    plain = cls(32, n_heads=4, **options.get("shape", {}))
    torch.manual_seed(0)
    extended = cls(32, n_heads=4, **options.get("shape", {}), **options["extra"])
    extended.load_state_dict(plain.state_dict(), strict=False)
    return plain, extended


@pytest.mark.parametrize("cls,shape", [(Attention, {}), (SlidingWindowAttention, {"window": 4})])
def test_a_closed_gate_halves_and_a_high_sink_silences(cls, shape):
    """A gate projection of zeros gives sigmoid(0) = 1/2 everywhere; a sink logit far above every
    score takes all the attention, so the heads output zeros."""
    x = torch.randn(2, 9, 32)
    plain, gated = pair(cls, shape=shape, extra={"output_gate": True})
    with torch.no_grad():
        gated.gate_proj.weight.zero_()
        torch.testing.assert_close(gated(x), plain(x) / 2)
    _, sunk = pair(cls, shape=shape, extra={"sinks": True})
    with torch.no_grad():
        sunk.sink_logits.fill_(80.0)
        torch.testing.assert_close(sunk(x), torch.zeros_like(x), atol=1e-6, rtol=0)


def test_sinks_start_at_zero_and_learn():
    layer = Attention(32, n_heads=4, sinks=True)
    assert torch.equal(layer.sink_logits, torch.zeros(4))
    layer(torch.randn(1, 5, 32)).square().sum().backward()
    assert layer.sink_logits.grad is not None and bool(layer.sink_logits.grad.ne(0).all())


@pytest.mark.parametrize("backend", ["triton", "flex"])
def test_sinks_on_a_backend_without_them_is_a_one_line_option_error(backend):
    with pytest.raises(OptionError, match=f"the '{backend}' backend has no attention sinks; use auto, reference, "
                                          "chunkwise, sdpa") as info:
        SlidingWindowAttention(32, n_heads=4, sinks=True, backend=backend)
    assert "\n" not in str(info.value)
