"""LayerzooCache: rows of the mixers' states selected, reordered and repeated as transformers asks."""

import pytest
import torch

from layerzoo.hf import LayerzooCache
from layerzoo.mixers.states import select_streams

from tests.helpers.hf_inputs import cache_of, prompts


def test_reordered_rows_continue_as_the_rows_they_came_from(hf_model):
    ids = torch.stack(prompts([6, 6, 6], hf_model.config.vocab_size))
    step = torch.tensor([[3], [5], [7]])
    with torch.no_grad():
        cache = cache_of(hf_model(ids))
        states = cache.states
        cache.reorder_cache(torch.tensor([2, 0, 0]))
        assert cache.batch_size == 3
        moved = hf_model(step, cache=cache).logits
        for row, source in enumerate([2, 0, 0]):
            alone = LayerzooCache([select_streams(layer, source, source + 1) for layer in states], columns=6)
            torch.testing.assert_close(moved[row], hf_model(step[row:row + 1], cache=alone).logits[0])


def test_select_and_repeat_take_and_copy_rows(swax):
    ids = torch.stack(prompts([4, 4], swax.config.vocab_size))
    with torch.no_grad():
        cache = cache_of(swax(ids))
        first = LayerzooCache([select_streams(layer, 0, 1) for layer in cache.states], columns=4)
        cache.batch_select_indices(torch.tensor([0]))
        first.batch_repeat_interleave(2)
        assert (cache.batch_size, first.batch_size) == (1, 2)
        step = torch.tensor([[9], [9]])
        twice = swax(step, cache=first).logits
        torch.testing.assert_close(twice[0], twice[1])
        torch.testing.assert_close(twice[:1], swax(step[:1], cache=cache).logits)


def test_an_empty_cache_reorders_to_nothing_and_refuses_what_it_cannot_do():
    cache = LayerzooCache(n_layers=3)
    cache.reorder_cache(torch.tensor([1, 0]))
    assert (len(cache), cache.batch_size, cache.get_seq_length(), cache.is_croppable) == (3, -1, 0, False)
    for call in (lambda: cache.crop(-2), cache.activate_past_recording,
                 lambda: cache.update(torch.zeros(1), torch.zeros(1), 0)):
        with pytest.raises(ValueError, match=r"^LayerzooCache\.\w+: a layerzoo model's cache holds [^\n]*$"):
            call()
