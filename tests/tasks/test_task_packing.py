"""`pack: true`: training rows of several examples of random lengths, their boundaries in cu_seqlens."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import layerzoo
from layerzoo.tasks import IGNORE, TASKS, make_task
from layerzoo.training.loop.trainer import train

VOCAB = 257


@pytest.fixture(scope="module")
def options(tmp_path_factory):
    text = tmp_path_factory.mktemp("text") / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40)
    text.with_name("more.txt").write_text("pack my box with five dozen liquor jugs. " * 30)
    files = [str(text), str(text.with_name("more.txt"))]
    return {"bytes": {"paths": [str(text)]}, "text": {"files": files}, "qa": {"files": files}}


@pytest.mark.parametrize("name", sorted(TASKS))
@given(extra=st.integers(0, 150), seeds=st.lists(st.integers(0, 2**40), min_size=1, max_size=3))
def test_packed_rows_hold_whole_examples_that_the_seeds_fix(options, name, extra, seeds):
    task = make_task(name, {"pack": True, **options.get(name, {})}, VOCAB)
    seq_len = task.min_seq_len() + extra
    batch = task.batch(seq_len, seeds, pack=True)
    assert batch.input_ids.shape == batch.targets.shape == (len(seeds), seq_len)
    offsets = batch.cu_seqlens.tolist()
    assert offsets[0] == 0 and offsets[-1] == len(seeds) * seq_len
    assert set(range(0, len(seeds) * seq_len + 1, seq_len)) <= set(offsets), "an example crosses a row's end"
    again = task.batch(seq_len, seeds, pack=True)
    assert torch.equal(again.input_ids, batch.input_ids) and torch.equal(again.cu_seqlens, batch.cu_seqlens)
    for start, end in zip(offsets, offsets[1:]):
        length = end - start
        targets = batch.targets.flatten()[start:end]
        # an example, or a rest too short for one: padding, nothing scored
        assert length >= task.min_seq_len() or bool((targets == IGNORE).all())


def test_a_packed_niah_run_trains(tmp_path):
    spec = layerzoo.load_spec("swax-tiny", ["training.steps=3", "training.task.pack=true", "training.log_every=1",
                                            "training.batch_size=4", "training.eval.samples=2", "training.eval.lengths=[64]",
                                            "training.eval.depths=[0.5]"])
    train(spec, run_dir=tmp_path / "run", progress=False)
    assert (tmp_path / "run" / "metrics.jsonl").read_text().count("loss") >= 3
