"""Sampling temperatures: a bad one is a one-line error; a positive one, however small, samples.
Generating from a state continues it."""

import pytest
import torch

import layerzoo


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return layerzoo.build("swa-tiny").eval()


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -1.0])
def test_a_temperature_that_is_not_a_finite_number_ge_0_is_refused(model, temperature):
    with pytest.raises(ValueError, match=f"temperature must be a finite number >= 0, got {temperature}"):
        model.generate(torch.zeros(1, 3, dtype=torch.long), 2, temperature=temperature)


@pytest.mark.parametrize("temperature", [5e-324, 1e-30])  # a denormal, and one that overflows logits / temperature
def test_a_tiny_temperature_samples_the_most_likely_token(model, temperature):
    prompt = torch.randint(0, 256, (2, 5), generator=torch.Generator().manual_seed(1))
    greedy = model.generate(prompt, 6)
    sampled = model.generate(prompt, 6, temperature=temperature, generator=torch.Generator().manual_seed(2))
    assert torch.equal(sampled, greedy)


def test_generating_from_a_state_continues_the_rows_it_holds(model):
    prompt = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        _, state = model(prompt[:, :6], return_state=True)
    assert torch.equal(model.generate(prompt[:, 6:], 5, state=state), model.generate(prompt, 5)[:, 6:])
