import pytest
import torch
from hypothesis import given, strategies as st

from layerzoo.errors import OptionError
from layerzoo.tasks import IGNORE, VARIANTS, make_task
from layerzoo.tasks.niah import IS, NEEDLE, QUERY

VOCAB = 128


def task(variant, **options):
    return make_task("niah", {"variants": [variant], **options}, VOCAB)


examples = st.fixed_dictionaries({
    "variant": st.sampled_from(VARIANTS),
    "key_len": st.integers(1, 3),
    "value_len": st.integers(1, 3),
    "num_needles": st.integers(1, 4),
    "extra": st.integers(0, 100),
    "depth": st.one_of(st.none(), st.floats(0, 1)),
    "seed": st.integers(0, 2**40),
})


def generate(params):
    t = task(params["variant"], key_len=params["key_len"], value_len=params["value_len"], num_needles=params["num_needles"])
    seq_len = t.min_seq_len() + params["extra"]
    inputs, targets = t.example(seq_len, torch.Generator().manual_seed(params["seed"]), params["depth"])
    return t, seq_len, inputs, targets


def needle_starts(inputs):
    return (inputs == NEEDLE).nonzero().squeeze(1).tolist()


@given(examples)
def test_the_queried_needle_sits_at_the_requested_depth(params):
    t, seq_len, inputs, targets = generate(params)
    query = (inputs == QUERY).nonzero()[0].item()
    haystack_len = query  # the first query starts right after the haystack
    starts = needle_starts(inputs)
    if params["depth"] is not None:
        expected = round(params["depth"] * (haystack_len - t.needle_len))
        assert expected in starts
        first_key = inputs[expected + 1:expected + 1 + t.key_len]
        asked = [inputs[q + 1:q + 1 + t.key_len] for q in (inputs == QUERY).nonzero().squeeze(1).tolist()]
        assert any(torch.equal(first_key, key) for key in asked)  # a query asks for it (multiquery: in random order)
    # needles never overlap and all lie in the haystack
    assert all(b - a >= t.needle_len for a, b in zip(starts, starts[1:]))
    assert starts[-1] + t.needle_len <= query


@given(examples)
def test_targets_only_on_value_tokens_and_they_are_the_next_token(params):
    t, seq_len, inputs, targets = generate(params)
    scored = (targets != IGNORE).nonzero().squeeze(1)
    assert len(scored) > 0
    assert (scored < seq_len - 1).all()
    assert torch.equal(targets[scored], inputs[scored + 1])  # teacher-forced next token
    assert (targets[scored] >= 3 * VOCAB // 4).all()  # value range only
    query = (inputs == QUERY).nonzero()[0].item()
    assert (scored > query).all()
    # every value token of the query section is scored
    tail = torch.arange(query, seq_len - 1)
    values_next = tail[inputs[tail + 1] >= 3 * VOCAB // 4]
    assert set(values_next.tolist()) == set(scored.tolist())


@given(examples)
def test_no_collisions_between_filler_keys_and_values(params):
    t, seq_len, inputs, targets = generate(params)
    starts = needle_starts(inputs)
    keys = [tuple(inputs[s + 1:s + 1 + t.key_len].tolist()) for s in starts]
    values = [tuple(inputs[s + 2 + t.key_len:s + t.needle_len].tolist()) for s in starts]
    if params["variant"] == "multivalue":
        assert len(set(keys)) == 1
    else:
        assert len(set(keys)) == len(keys)
    flat_values = [v for value in values for v in value]
    assert len(set(flat_values)) == len(flat_values)
    assert all(VOCAB // 2 <= k < 3 * VOCAB // 4 for key in keys for k in key)
    in_needles = torch.zeros(seq_len, dtype=torch.bool)
    for s in starts:
        in_needles[s:s + t.needle_len] = True
    query = (inputs == QUERY).nonzero()[0].item()
    filler = inputs[:query][~in_needles[:query]]
    assert ((filler >= 8) & (filler < VOCAB // 2)).all()
    assert (inputs[:query] == IS).sum() == len(starts)


@given(examples)
def test_the_same_seed_gives_the_same_data(params):
    _, _, a_inputs, a_targets = generate(params)
    _, _, b_inputs, b_targets = generate(params)
    assert torch.equal(a_inputs, b_inputs) and torch.equal(a_targets, b_targets)


def test_multivalue_asks_every_value_in_order_of_appearance():
    t = task("multivalue", key_len=1, value_len=2, num_needles=4)
    inputs, targets = t.example(200, torch.Generator().manual_seed(3), 0.7)
    starts = needle_starts(inputs)
    in_order = torch.cat([inputs[s + 3:s + 5] for s in starts])
    assert torch.equal(targets[targets != IGNORE], in_order)


def test_noise_haystack_repeats_one_sentence_and_random_does_not():
    noise = task("single_noise").example(300, torch.Generator().manual_seed(0), 0.0)[0]
    rand = task("single_random").example(300, torch.Generator().manual_seed(0), 0.0)[0]
    assert torch.equal(noise[100:112], noise[112:124])
    assert not torch.equal(rand[100:112], rand[112:124])


def test_batches_differ_by_seed():
    t = make_task("niah", {}, VOCAB)
    a, b = t.batch(120, [1, 2]), t.batch(120, [3, 4])
    assert not torch.equal(a.input_ids, b.input_ids)


@pytest.mark.parametrize("options, key", [
    ({"variants": ["single", "multikey"]}, "variants"),
    ({"key_len": 0}, "key_len"),
    ({"num_needles": 40}, "num_needles"),
    ({"vocab_size": 512}, "vocab_size"),
])
def test_bad_options_name_the_key(options, key):
    with pytest.raises(OptionError) as error:
        make_task("niah", options, VOCAB)
    assert error.value.key == key and "\n" not in str(error.value)


def test_too_short_sequences_are_refused():
    t = make_task("niah", {}, VOCAB)
    with pytest.raises(ValueError, match="too short"):
        t.batch(t.min_seq_len() - 1, [0])
