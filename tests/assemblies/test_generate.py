"""Sampling temperatures: a bad one is a one-line error; a positive one, however small, samples.
Generating from a state continues it. Reading the prompt asks the head for the logits it uses only."""

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


@pytest.mark.parametrize(("mask", "kept"), [
    (None, [1, 1, 1]),
    (torch.tensor([[1] * 9, [1] * 9]), [1, 1, 1]),
    (torch.tensor([[1] * 9, [1] * 4 + [0] * 5]), [1, 3, 1]),  # row 1 ends mid-piece, then has no real token
])
def test_reading_the_prompt_keeps_the_logits_of_each_rows_last_token_only(model, monkeypatch, mask, kept):
    asked = []
    forward = model.forward

    def spy(*args, logits_to_keep=0, **kwargs):
        asked.append(logits_to_keep)
        return forward(*args, logits_to_keep=logits_to_keep, **kwargs)

    monkeypatch.setattr(model, "forward", spy)
    prompt = torch.randint(0, 256, (2, 9), generator=torch.Generator().manual_seed(4))
    model.generate(prompt, 2, prefill_chunk_size=3, attention_mask=mask)
    assert asked[:3] == kept


@pytest.mark.parametrize("token", [256, 10**6, -1])
def test_a_token_id_outside_the_vocabulary_is_refused_in_one_line(model, token):
    prompt = torch.tensor([[1, 2, token]])
    with pytest.raises(ValueError, match=rf"^input_ids must be token ids in \[0, 256\) \(the vocabulary\), got {token}$"):
        model.generate(prompt, 2)


@pytest.mark.parametrize("arguments,words", [
    ({"max_new_tokens": 1.5}, "max_new_tokens must be an integer >= 0, got 1.5"),
    ({"max_new_tokens": True}, "max_new_tokens must be an integer >= 0, got True"),
    ({"max_new_tokens": -1}, "max_new_tokens must be an integer >= 0, got -1"),
    ({"top_k": 0}, "top_k must be an integer >= 1 or None, got 0"),
    ({"top_k": 2.5}, "top_k must be an integer >= 1 or None, got 2.5"),
    ({"temperature": "0.5"}, "temperature must be a finite number >= 0, got '0.5'"),
    ({"prefill_chunk_size": 0}, "prefill_chunk_size must be an integer >= 1 or None, got 0"),
    ({"input_ids": [[1, 2]]}, "input_ids must be a (batch, length >= 1) tensor of token ids, got list"),
    ({"input_ids": torch.ones(1, 3)}, "input_ids must be a (batch, length >= 1) tensor of token ids, got float32"),
])
def test_malformed_arguments_are_refused_before_any_work(model, monkeypatch, arguments, words):
    """Each a one-line ValueError naming the argument, raised before the prompt is read."""
    def no_prefill(*args, **kwargs):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(model, "forward", no_prefill)
    arguments = {"input_ids": torch.zeros(1, 3, dtype=torch.long), "max_new_tokens": 2, **arguments}
    with pytest.raises(ValueError) as error:
        model.generate(**arguments)
    assert str(error.value) == words
