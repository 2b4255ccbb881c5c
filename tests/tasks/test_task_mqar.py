import pytest
import torch
from hypothesis import given, strategies as st

from layerzoo.errors import OptionError
from layerzoo.tasks import IGNORE, make_task


@given(num_pairs=st.integers(1, 12), vocab=st.sampled_from([32, 64, 256]), extra=st.integers(0, 40), seed=st.integers(0, 2**40))
def test_pairs_queries_and_labels(num_pairs, vocab, extra, seed):
    if num_pairs >= vocab // 2:
        return
    task = make_task("mqar", {"num_pairs": num_pairs}, vocab)
    seq_len = 3 * num_pairs + extra
    inputs, targets = task.example(seq_len, torch.Generator().manual_seed(seed))
    keys, values = inputs[0:2 * num_pairs:2], inputs[1:2 * num_pairs:2]
    assert ((keys >= 1) & (keys < vocab // 2)).all() and ((values >= vocab // 2) & (values < vocab)).all()
    assert len(set(keys.tolist())) == num_pairs and len(set(values.tolist())) == num_pairs
    pairs = dict(zip(keys.tolist(), values.tolist()))
    rest = inputs[2 * num_pairs:]
    assert (targets[:2 * num_pairs] == IGNORE).all()
    scored = (targets != IGNORE).nonzero().squeeze(1)
    assert len(scored) == num_pairs
    for position in scored.tolist():
        assert pairs[inputs[position].item()] == targets[position].item()
    # each key comes back exactly once, and only as a query
    assert sorted(k for k in rest.tolist() if k in pairs) == sorted(pairs)
    again = task.example(seq_len, torch.Generator().manual_seed(seed))
    assert torch.equal(again[0], inputs) and torch.equal(again[1], targets)


def test_too_many_pairs_for_the_vocabulary():
    with pytest.raises(OptionError, match="need more than 80 tokens") as error:
        make_task("mqar", {"num_pairs": 40}, 64)
    assert error.value.key == "num_pairs"


def test_unknown_task_and_option():
    with pytest.raises(OptionError, match="did you mean 'mqar'"):
        make_task("mqr", {}, 64)
    with pytest.raises(OptionError, match="did you mean 'num_pairs'"):
        make_task("mqar", {"pairs": 3}, 64)
