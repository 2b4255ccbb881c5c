"""transformers' conventions a causal LM follows: position_ids (repeating the mask's positions,
or packing sequences as DataCollatorWithFlattening does), padding kept out of the states of a
continued forward, attention weights of padded rows, decoder blocks as GradientCheckpointingLayers,
and no deprecation warning for the cache passed as past_key_values."""

import warnings

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, strategies as st
from transformers import DataCollatorWithFlattening
from transformers.modeling_layers import GradientCheckpointingLayer

from layerzoo.hf import HFError, LayerzooForCausalLM
from layerzoo.mixers.attention import CausalAttention
from layerzoo.testing import assert_close, padded_batch

from tests.helpers.hf_inputs import cache_of, prompts


def mask_positions(mask: torch.Tensor) -> torch.Tensor:
    """transformers' position_ids for a padded batch (its left-padding check fills padding with 1)."""
    return (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 1)


def test_a_padded_batch_continued_from_its_cache_equals_each_row_alone(hf_model):
    vocab = hf_model.config.vocab_size
    rows, continuations = prompts([7, 3], vocab), prompts([2, 2], vocab, seed=2)
    batch, mask = padded_batch(rows, "left")
    more = torch.stack(continuations)
    more_mask = torch.tensor([[1, 1], [0, 1]])  # the second piece pads row 1 too
    with torch.no_grad():
        first = hf_model(batch, attention_mask=mask, position_ids=mask_positions(mask), use_cache=True)
        full_mask = torch.cat((mask, more_mask), dim=1)
        second = hf_model(more, attention_mask=full_mask, position_ids=mask_positions(full_mask)[:, -2:],
                          cache=cache_of(first), use_cache=True)
        for index, (row, continuation) in enumerate(zip(rows, continuations)):
            real = more_mask[index] == 1
            alone = hf_model(torch.cat((row, continuation[real]))[None]).logits[0, len(row):]
            assert_close(second.logits[index][real], alone, what=f"row {index}, continued")
            assert not second.logits[index][~real].any()


def test_position_ids_generate_passes_are_read_and_give_what_none_give(swax):
    rows = prompts([6, 2], swax.config.vocab_size)
    batch, mask = padded_batch(rows, "left")
    with torch.no_grad():
        plain = swax(batch, attention_mask=mask).logits
        assert torch.equal(swax(batch, attention_mask=mask, position_ids=mask_positions(mask)).logits, plain)
        assert torch.equal(swax(batch[:1], position_ids=torch.arange(6)[None]).logits, swax(batch[:1]).logits)
        generated = swax.generate(batch, attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
        assert torch.equal(generated, swax.model.generate(batch, 4, attention_mask=mask))


@given(lengths=st.lists(st.integers(1, 5), min_size=1, max_size=3))
def test_packed_position_ids_run_each_sequence_alone(swax, lengths):
    sequences = prompts(lengths, swax.config.vocab_size)
    features = DataCollatorWithFlattening(return_tensors="pt")([{"input_ids": row.tolist()} for row in sequences])
    assert set(features) == {"input_ids", "labels", "position_ids"}
    with torch.no_grad():
        out = swax(**features, output_hidden_states=True)
        alone = [swax(row[None]).logits[0] for row in sequences]
        assert_close(out.logits[0], torch.cat(alone), what="packed logits")
        assert out.hidden_states[0].shape == (1, sum(lengths), swax.config.hidden_size)
        targets = torch.cat([F.pad(row[1:], (0, 1), value=-100) for row in sequences])
        if max(lengths) > 1:  # else no token is scored
            assert_close(out.loss, F.cross_entropy(torch.cat(alone), targets, ignore_index=-100), what="packed loss")
        if len(lengths) > 1:  # one sequence is the plain row, cached as any
            assert cache_of(swax(features["input_ids"], position_ids=features["position_ids"])) is None


def test_position_ids_a_layerzoo_model_cannot_honour_are_one_line_errors(swax):
    ids = torch.stack(prompts([4, 4], swax.config.vocab_size))
    cache = cache_of(swax(ids, use_cache=True))
    packed = torch.tensor([[0, 1, 0, 1]] * 2)
    for arguments, words in (
            ({"position_ids": torch.arange(3, 7)[None]}, r"^position_ids row 0 is \[3, 4, 5, 6\]: neither the positions"),
            ({"position_ids": torch.arange(4)[None], "cache": cache}, r"^position_ids row 0 is \[0, 1, 2, 3\]: neither"),
            ({"position_ids": packed, "use_cache": True}, r"^position_ids pack 4 sequences into 2 row\(s\)"),
            ({"position_ids": packed, "attention_mask": torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]])},
             r"^position_ids row 0 is \[0, 1, 0, 1\]: neither"),
            ({"position_ids": torch.arange(4.0)[None]}, r"^position_ids must be integers of shape \(2, 4\) or \(1, 4\)"),
            ({"position_ids": torch.arange(8)[None]}, r"^position_ids must be integers of shape")):
        with pytest.raises(HFError, match=words) as error:
            swax(ids, **arguments)
        assert "\n" not in str(error.value)


def test_attention_weights_of_padded_rows_are_each_rows_own_and_zero_at_padding(hf_model):
    layers = [block.mixer for block in hf_model.model.blocks if isinstance(block.mixer, CausalAttention)]
    if not layers:
        pytest.skip("no attention layer")
    rows = prompts([5, 2], hf_model.config.vocab_size)
    batch, mask = padded_batch(rows, "left")
    with torch.no_grad():
        out = hf_model(batch, attention_mask=mask, output_attentions=True, use_cache=True)
        for index, row in enumerate(rows):
            alone = hf_model(row[None], output_attentions=True).attentions
            real = mask[index] == 1
            for layer, (weights, own) in enumerate(zip(out.attentions, alone)):
                assert weights.shape == (2, layers[layer].n_heads, 5, 5)
                assert_close(weights[index][:, real][..., real], own[0], what=f"row {index}, layer {layer}")
                assert not weights[index][:, ~real].any() and not weights[index][..., ~real].any()
        step = hf_model(batch[:, :1], cache=cache_of(out), attention_mask=torch.cat((mask, mask[:, :1] * 0 + 1), 1),
                        output_attentions=True).attentions
        for layer, weights in zip(layers, step):  # the shorter row's history right-aligned, zeros before it
            kept = 5 if layer.window is None else min(5, layer.window - 1)
            assert weights.shape == (2, layer.n_heads, 1, kept + 1)
            assert not weights[1, ..., :kept - min(2, kept)].any()
            assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)), scale=10) if layer.sink_logits is None else None


def test_blocks_are_gradient_checkpointing_layers_checkpointed_once_each(swax):
    model = LayerzooForCausalLM.from_spec("swax-tiny").train()
    assert all(isinstance(block, GradientCheckpointingLayer) for block in model.model.blocks)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    calls = []
    for block in model.model.blocks:
        checkpoint = block._gradient_checkpointing_func
        block._gradient_checkpointing_func = lambda *args, _run=checkpoint, **kwargs: calls.append(1) or _run(*args, **kwargs)
    ids = torch.stack(prompts([6, 6], model.config.vocab_size))
    model(ids, labels=ids).loss.backward()
    assert len(calls) == len(model.model.blocks)
    calls.clear()
    with torch.no_grad():
        model.eval()(ids)
    assert not calls  # transformers checkpoints in training only


def test_the_cache_as_past_key_values_prints_no_deprecation_warning(swax):
    ids = torch.stack(prompts([5, 5], swax.config.vocab_size))
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("error")
        cache = cache_of(swax(ids[:, :3], use_cache=True))
        stepped = swax(ids[:, 3:4], past_key_values=cache, use_cache=True)
        assert cache_of(stepped).get_seq_length() == 4
        greedy = {"max_new_tokens": 2, "do_sample": False, "pad_token_id": 0}
        continued = swax.generate(ids, past_key_values=cache_of(stepped), **greedy)  # reads the fifth token only
        assert torch.equal(continued, swax.generate(ids, **greedy))
        swax.generate(ids, past_key_values=None, max_new_tokens=1, do_sample=False, pad_token_id=0)
    with pytest.raises(HFError, match=r"^generate takes the cache as \w+= or past_key_values=, not both$"):
        swax.generate(ids, past_key_values=cache, cache=cache, max_new_tokens=1)
