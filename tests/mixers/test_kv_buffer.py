"""Keys appended in place (layerzoo.mixers.kv_buffer): equal to torch.cat whatever order states are
extended in, no state ever changed by a later call, and no copy per decoding step."""

import torch
from hypothesis import given, settings, strategies as st

from layerzoo.mixers.attention import Attention, SlidingWindowAttention
from layerzoo.mixers.kv_buffer import extend


@settings(deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 10), st.integers(1, 40)), min_size=1, max_size=12),
       keep=st.one_of(st.none(), st.integers(0, 30)))
def test_extending_any_earlier_state_equals_concatenation_and_leaves_every_state_as_it_was(steps, keep):
    """A tree of states: each step extends one already made (chosen by index, so older states are
    extended after newer ones took their buffer's columns) by T keys."""
    torch.manual_seed(0)
    first = torch.randn(2, 3, 2, 4)
    states = [(extend(None, first, keep)[1], first)]  # (kept, every key on its path)
    for parent, length in steps:
        kept, path = states[parent % len(states)]
        new = torch.randn(2, length, 2, 4)
        every, kept = extend(kept, new, keep)
        path = torch.cat((path, new), dim=1)
        expected_every = torch.cat((states[parent % len(states)][0], new), dim=1)
        assert torch.equal(every, expected_every)
        states.append((kept, path))
    for kept, path in states:  # nothing written later changed an earlier state
        expected = path if keep is None else path[:, path.shape[1] - min(keep, path.shape[1]):]
        assert torch.equal(kept, expected)


def test_decoding_writes_into_one_buffer_and_agrees_with_one_call():
    torch.manual_seed(0)
    for layer in (Attention(24, n_heads=4, n_kv_heads=2), SlidingWindowAttention(24, n_heads=4, window=8)):
        x = torch.randn(3, 40, 24)
        with torch.no_grad():
            whole, _ = layer.mix(x, None, None)
            y, state = layer.mix(x[:, :20], None, None)
            outputs, buffers = [y], set()
            for t in range(20, 40):
                y, state = layer.mix(x[:, t:t + 1], state, None)
                outputs.append(y)
                buffers.add(state.k.untyped_storage().data_ptr())
        torch.testing.assert_close(torch.cat(outputs, dim=1), whole)
        # one copy into a buffer with room (64 spare columns at least), then appends in place
        assert len(buffers) == 1, f"{type(layer).__name__}: {len(buffers)} buffers over 20 steps"


def test_under_autograd_the_keys_are_fresh_tensors_that_carry_gradients():
    cached, new = torch.randn(1, 4, 2, 3, requires_grad=True), torch.randn(1, 2, 2, 3, requires_grad=True)
    every, kept = extend(cached, new, keep=3)
    assert kept.shape[1] == 3
    every.sum().backward()
    assert torch.equal(cached.grad, torch.ones_like(cached)) and torch.equal(new.grad, torch.ones_like(new))
