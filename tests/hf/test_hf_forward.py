"""The forward of a transformers causal LM, as transformers documents it: hidden states,
inputs_embeds (forward and generate), attention weights where a layer computes them (padded
rows: test_hf_conventions.py),
shift_labels, num_items_in_batch and return_dict=False."""

import pytest
import torch
import torch.nn.functional as F

from layerzoo.hf import HFError, LayerzooForCausalLM
from layerzoo.kernels.sliding_window import sliding_window_mask
from layerzoo.mixers.attention import CausalAttention
from layerzoo.testing import assert_close, padded_batch

from tests.helpers.hf_inputs import cache_of, prompts

GREEDY = {"do_sample": False, "pad_token_id": 0}


def attention_layers(model) -> list:
    return [block.mixer for block in model.model.blocks if isinstance(block.mixer, CausalAttention)]


def test_hidden_states_are_the_embeddings_each_blocks_output_and_the_final_norms(hf_model):
    ids = torch.stack(prompts([9, 9], hf_model.config.vocab_size))
    with torch.no_grad():
        out = hf_model(ids, output_hidden_states=True)
        states = out.hidden_states
        assert len(states) == hf_model.config.num_hidden_layers + 1
        assert all(state.shape == (2, 9, hf_model.config.hidden_size) for state in states)
        assert torch.equal(states[0], hf_model.model.embedding(ids))
        for index, block in enumerate(hf_model.model.blocks[:-1]):
            assert torch.equal(states[index + 1], block(states[index])), f"block {index}"
        assert torch.equal(states[-1], hf_model.model.final_norm(hf_model.model.blocks[-1](states[-2])))
        assert hf_model(ids).hidden_states is None


def test_a_padded_rows_hidden_states_are_its_own(hf_model):
    rows = prompts([7, 3], hf_model.config.vocab_size)
    batch, mask = padded_batch(rows, "left")
    with torch.no_grad():
        states = hf_model(batch, attention_mask=mask, output_hidden_states=True).hidden_states
        for index, row in enumerate(rows):
            alone = hf_model(row[None], output_hidden_states=True).hidden_states
            for layer, (state, own) in enumerate(zip(states, alone)):
                assert_close(state[index][mask[index] == 1], own[0], what=f"row {index}, hidden state {layer}")
                assert not state[index][mask[index] == 0].any()


@pytest.mark.parametrize("side", [None, "left"])
def test_hidden_states_are_the_activations_the_logits_come_from(side):
    """Gradients reach every hidden state handed out (transformers' retain_grad use), padded or
    not: the blocks and the head read those very tensors, not copies."""
    torch.manual_seed(0)
    model = LayerzooForCausalLM.from_spec("swax-tiny", ["model.n_layers=2"])
    rows = prompts([7, 4], model.config.vocab_size)
    batch, mask = padded_batch(rows, "left") if side else (torch.stack([row[:4] for row in rows]), None)
    out = model(batch, attention_mask=mask, output_hidden_states=True, use_cache=False)
    for state in out.hidden_states:
        state.retain_grad()
    real = torch.ones(batch.shape, dtype=torch.bool) if mask is None else mask.bool()
    out.logits[real].sum().backward()
    for index, state in enumerate(out.hidden_states):
        assert state.grad is not None and state.grad[real].abs().sum() > 0, f"hidden state {index}"


def test_inputs_embeds_stand_for_input_ids_in_forward_and_generate(hf_model):
    ids = torch.stack(prompts([6, 6], hf_model.config.vocab_size))
    embeds = hf_model.model.embedding(ids).detach()
    with torch.no_grad():
        assert torch.equal(hf_model(inputs_embeds=embeds).logits, hf_model(ids).logits)
        generated = hf_model.generate(inputs_embeds=embeds, max_new_tokens=5, **GREEDY)
        assert torch.equal(generated, hf_model.generate(ids, max_new_tokens=5, **GREEDY)[:, ids.shape[1]:])
    for ids_, embeds_, message in ((ids, embeds, "exactly one"), (None, None, "exactly one"),
                                   (None, embeds[..., :3], r"inputs_embeds must be \(batch, length, \d+\)")):
        with pytest.raises(HFError, match=message):
            hf_model(ids_, inputs_embeds=embeds_)


def test_attention_weights_are_each_attention_layers_softmax(hf_model):
    ids = torch.stack(prompts([8, 8], hf_model.config.vocab_size))
    layers = attention_layers(hf_model)
    if not layers:
        mixers = ", ".join(dict.fromkeys(layer.type for layer in hf_model.model.config.layers))
        with pytest.raises(HFError, match=rf"^output_attentions: no layer of this model computes attention weights "
                                          rf"\(its mixers: {mixers}\)$"):
            hf_model(ids, output_attentions=True)
        return
    with torch.no_grad():
        out = hf_model(ids, output_attentions=True, use_cache=True)
        assert len(out.attentions) == len(layers)
        for layer, weights in zip(layers, out.attentions):
            assert weights.shape == (2, layer.n_heads, 8, 8)
            visible = sliding_window_mask(8, 8, layer.window)
            assert not weights[..., ~visible].any()
            total = weights.sum(-1)
            if layer.sink_logits is None:
                assert_close(total, torch.ones_like(total))
            else:
                assert bool((total <= 1 + 1e-6).all())
        cache = cache_of(out)
        step = hf_model(ids[:, :1], cache=cache, output_attentions=True).attentions
        assert [weights.shape[-2:] for weights in step] == [(1, 9)] * len(layers)
        assert hf_model(ids).attentions is None


def test_shift_labels_are_the_labels_shifted_and_num_items_divides_the_sum(swax):
    ids = torch.stack(prompts([10, 10], swax.config.vocab_size))
    labels = ids.clone()
    labels[0, :4] = -100
    shifted = F.pad(labels[:, 1:], (0, 1), value=-100)
    with torch.no_grad():
        loss = swax(ids, labels=labels).loss
        assert_close(swax(ids, shift_labels=shifted).loss, loss)
        assert_close(swax(ids, labels=torch.zeros_like(ids), shift_labels=shifted).loss, loss)  # shift_labels win
        counted = int((shifted != -100).sum())
        assert_close(swax(ids, labels=labels, num_items_in_batch=2 * counted).loss, loss / 2)
    with pytest.raises(HFError, match=r"shift_labels must have the shape of the inputs \(2, 10\)"):
        swax(ids, shift_labels=shifted[:, :3])


def test_return_dict_false_gives_the_outputs_as_a_tuple(swax):
    ids = torch.stack(prompts([6], swax.config.vocab_size))
    with torch.no_grad():
        out = swax(ids, labels=ids, output_hidden_states=True)
        loss, logits, *rest = swax(ids, labels=ids, output_hidden_states=True, return_dict=False)
    assert torch.equal(loss, out.loss) and torch.equal(logits, out.logits)
    assert len(rest[-1]) == len(out.hidden_states)
