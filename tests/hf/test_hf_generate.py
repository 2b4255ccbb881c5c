"""transformers' generate() on layerzoo models: what layerzoo's own generate gives, batched,
sampled, stopped, streamed and beam-searched."""

import pytest
import torch
from transformers.generation.streamers import BaseStreamer

from layerzoo.hf import HFError, LayerzooCache
from layerzoo.testing import padded_batch
from layerzoo.training.objectives.language_model import score
from layerzoo.tasks import Batch

from tests.helpers.hf_inputs import cache_of, prompts

GREEDY = {"do_sample": False, "pad_token_id": 0}


def test_greedy_equals_layerzoos_generate_and_padded_prompts_generate_what_each_does_alone(hf_model):
    rows = prompts([9, 1, 14, 4], hf_model.config.vocab_size)
    batch, mask = padded_batch(rows, "left")
    with torch.no_grad():
        generated = hf_model.generate(batch, attention_mask=mask, max_new_tokens=8, **GREEDY)
        assert torch.equal(generated, hf_model.model.generate(batch, 8, attention_mask=mask))
        for index, row in enumerate(rows):
            alone = hf_model.generate(row[None], max_new_tokens=8, **GREEDY)
            assert torch.equal(alone, hf_model.model.generate(row[None], 8)), f"row {index} alone"
            assert torch.equal(generated[index, batch.shape[1]:], alone[0, len(row):]), f"row {index} in the batch"


def test_right_padded_prompts_step_as_recomputing_from_scratch_does(swax):
    """transformers reads the next token at the last column, padding or not (it warns); its own
    position_ids go wrong after right padding (each step: the last column's plus one), so generate
    passes none: each row's positions live in the states."""
    batch, mask = padded_batch(prompts([3, 9, 6], swax.config.vocab_size), "right")
    with torch.no_grad():
        cached = swax.generate(batch, attention_mask=mask, max_new_tokens=5, **GREEDY)
        recomputed = swax.generate(batch, attention_mask=mask, max_new_tokens=5, use_cache=False, **GREEDY)
    assert torch.equal(cached, recomputed)


def test_chunked_prefill_reads_the_prompt_as_one_call_does(swax):
    batch, mask = padded_batch(prompts([13, 5], swax.config.vocab_size), "left")
    whole = swax.generate(batch, attention_mask=mask, max_new_tokens=6, **GREEDY)
    assert torch.equal(swax.generate(batch, attention_mask=mask, max_new_tokens=6, prefill_chunk_size=4, **GREEDY), whole)


def test_sampling_is_reproducible_and_top_p_keeps_to_the_nucleus(swax):
    ids = prompts([7], swax.config.vocab_size)[0][None]
    runs = []
    for _ in range(2):
        torch.manual_seed(5)
        runs.append(swax.generate(ids, max_new_tokens=10, do_sample=True, temperature=0.8, top_k=50, pad_token_id=0))
    assert torch.equal(*runs)
    out = swax.generate(ids, max_new_tokens=6, do_sample=True, top_p=0.3, top_k=0, pad_token_id=0,
                        output_scores=True, output_logits=True, return_dict_in_generate=True)
    for step, (logits, scores) in enumerate(zip(out.logits, out.scores)):
        probs = logits.softmax(-1)[0].sort(descending=True).values
        nucleus = int((probs.cumsum(0) - probs < 0.3).sum())  # the fewest most likely tokens holding 30%
        kept = torch.isfinite(scores[0])
        assert int(kept.sum()) == nucleus < swax.config.vocab_size, f"step {step}"
        assert kept[out.sequences[0, ids.shape[1] + step]], f"step {step} drew outside the nucleus"
    tiny_p = swax.generate(ids, max_new_tokens=6, do_sample=True, top_p=1e-6, top_k=0, pad_token_id=0)
    assert torch.equal(tiny_p, swax.generate(ids, max_new_tokens=6, **GREEDY))


class Collect(BaseStreamer):
    def __init__(self):
        self.values, self.ended = [], False

    def put(self, value):
        self.values.append(value.flatten())

    def end(self):
        self.ended = True


def test_eos_stops_and_the_streamer_receives_every_token(swax):
    ids = prompts([6], swax.config.vocab_size)[0][None]
    free = swax.generate(ids, max_new_tokens=8, **GREEDY)
    eos = int(free[0, ids.shape[1] + 3])
    first = ids.shape[1] + int((free[0, ids.shape[1]:] == eos).int().argmax())  # where eos first appears
    streamer = Collect()
    stopped = swax.generate(ids, max_new_tokens=8, eos_token_id=eos, streamer=streamer, **GREEDY)
    assert torch.equal(stopped[0], free[0, :first + 1])
    assert streamer.ended and torch.equal(torch.cat(streamer.values), stopped[0])


def test_beam_search_reorders_the_states_as_recomputing_from_scratch_does(swax):
    batch, mask = padded_batch(prompts([8, 3], swax.config.vocab_size), "left")
    beams = {"num_beams": 3, "num_return_sequences": 2, "max_new_tokens": 6, **GREEDY}
    cached = swax.generate(batch, attention_mask=mask, **beams)
    assert torch.equal(cached, swax.generate(batch, attention_mask=mask, use_cache=False, **beams))


def test_labels_give_layerzoos_loss(swax):
    ids = prompts([12, 12], swax.config.vocab_size, seed=4)
    ids = torch.stack(ids)
    labels = ids.clone()
    labels[0, :5] = -100
    with torch.no_grad():
        loss = swax(ids, labels=labels).loss
        total, _, count, _ = score(swax.model, Batch(ids, torch.cat((labels[:, 1:], torch.full((2, 1), -100)), 1)),
                                   torch.autocast("cpu", enabled=False))
    torch.testing.assert_close(loss, total / count)


def test_crop_and_foreign_caches_are_one_line_errors(swax):
    ids = prompts([5], swax.config.vocab_size)[0][None]
    out = swax.generate(ids, max_new_tokens=2, return_dict_in_generate=True, **GREEDY)
    cache = cache_of(out)
    assert isinstance(cache, LayerzooCache) and cache.get_seq_length() == ids.shape[1] + 1
    cache.crop(0)  # nothing to remove: allowed
    with pytest.raises(ValueError, match=r"^LayerzooCache.crop: .*cannot remove its last 1 tokens[^\n]*$"):
        cache.crop(-1)
    from transformers import DynamicCache
    with pytest.raises(HFError, match=r"^LayerzooForCausalLM takes a LayerzooCache .*got DynamicCache$"):
        swax(ids, cache=DynamicCache())
    with pytest.raises(HFError, match=r"^position_ids row 0 is \[2, 3, 4, 5, 6\]: neither"):
        swax(ids, position_ids=torch.arange(2, 7)[None])


@pytest.mark.parametrize("arguments,words", [
    ({"do_sample": True, "top_p": 0.0}, "top_p must be a number in (0, 1], got 0.0"),
    ({"do_sample": True, "top_p": 1.5}, "top_p must be a number in (0, 1], got 1.5"),
    ({"do_sample": True, "top_p": float("nan")}, "top_p must be a number in (0, 1], got nan"),
    ({"attention_mask": torch.tensor([[1, 1, 1], [0, 0, 0]])}, "attention_mask: every prompt needs at least one real token"),
    ({"attention_mask": torch.tensor([[1, 1, 2], [1, 1, 1]])}, "attention_mask must hold only 0 (padding) and 1"),
    ({"input_ids": torch.tensor([[1, 2, 256], [1, 2, 3]])}, "input_ids must be token ids in [0, 256) (the vocabulary), got 256"),
    ({"input_ids": torch.tensor([[1, 2, -1], [1, 2, 3]])}, "input_ids must be token ids in [0, 256) (the vocabulary), got -1"),
    ({"max_new_tokens": 1.5}, "max_new_tokens must be an integer >= 0, got 1.5"),
])
def test_generate_refuses_what_layerzoos_generate_refuses_before_any_work(swax, monkeypatch, arguments, words):
    """transformers accepts these (top_p outside (0, 1] and NaN are skipped or kept, a prompt of
    padding alone generates from nothing, max_new_tokens=1.5 generates 2); layerzoo refuses them,
    as its own generate does, in one line before the prompt is read."""
    def no_prefill(*args, **kwargs):
        raise AssertionError("the model ran before the arguments were checked")

    monkeypatch.setattr(swax, "forward", no_prefill)
    arguments = {"input_ids": torch.tensor([[1, 2, 3], [4, 5, 6]]), "max_new_tokens": 2, **GREEDY, **arguments}
    with pytest.raises(ValueError) as error:
        swax.generate(**arguments)
    assert str(error.value).startswith(words) and "\n" not in str(error.value)
