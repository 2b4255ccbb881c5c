"""Malformed inputs to any mixer are one-line ValueErrors naming the argument, raised by the base
class before any work: a new mixer gets them by subclassing Mixer."""

import pytest
import torch

import layerzoo
from layerzoo.testing import make_mixer

MIXERS = layerzoo.list_mixers()
D_MODEL = 32


def one_line_error(call, *words: str) -> str:
    with pytest.raises(ValueError) as error:
        call()
    message = str(error.value)
    assert "\n" not in message and all(word in message for word in words), message
    return message


@pytest.mark.parametrize("name", MIXERS)
def test_x_of_the_wrong_shape_or_dtype_is_named(name):
    mixer = make_mixer(name, D_MODEL)
    one_line_error(lambda: mixer(torch.randn(2, 5, 16)), "x must be", f"d_model = {D_MODEL}", "(2, 5, 16)")
    one_line_error(lambda: mixer(torch.randn(5, D_MODEL)), "x must be", f"(5, {D_MODEL})")
    one_line_error(lambda: mixer(torch.ones(2, 5, D_MODEL, dtype=torch.long)), "x must be floating point", "int64")
    one_line_error(lambda: mixer([[0.0] * D_MODEL]), "x must be a tensor", "list")


@pytest.mark.parametrize("name", MIXERS)
def test_a_state_of_another_batch_is_named(name):
    mixer = make_mixer(name, D_MODEL)
    with torch.no_grad():
        _, state = mixer(torch.randn(3, 4, D_MODEL), return_state=True)
        one_line_error(lambda: mixer(torch.randn(2, 4, D_MODEL), state=state), "state", "3 sequences", "x has 2")
        mask = torch.ones(2, 4, dtype=torch.long)
        one_line_error(lambda: mixer(torch.randn(2, 4, D_MODEL), state=state, attention_mask=mask), "3 sequences")
        packed = torch.tensor([0, 1, 4])
        one_line_error(lambda: mixer(torch.randn(1, 4, D_MODEL), state=state, cu_seqlens=packed),
                       "3 sequences", "cu_seqlens has 2")
        # the state of the right batch still runs
        y = mixer(torch.randn(3, 2, D_MODEL), state=state)
    assert y.shape == (3, 2, D_MODEL)
