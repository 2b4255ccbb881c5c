"""The qa task: facts placed among real passages, one asked at the end, its answer the only scored
tokens and the number its fact states; accuracy by exact match."""

import re

import pytest
import torch
from hypothesis import given, strategies as st
from torch import nn

from layerzoo.errors import OptionError
from layerzoo.tasks import IGNORE, Batch, make_task
from layerzoo.training.objectives.language_model import score
from tests.helpers.text_corpus import write_corpus

EOS = 256
FACT = re.compile(rb"\nThe secret number of (\w+) is (\d+)\.\n")
QUESTION = re.compile(rb"\nQuestion: What is the secret number of (\w+)\?\nAnswer:$")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    folder = tmp_path_factory.mktemp("qa")
    write_corpus(folder / "corpus", words=400)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LAYERZOO_CACHE", str(folder / "cache"))
        yield folder / "corpus"


def qa(corpus, vocab=257, **options):
    task = make_task("qa", {"files": [str(corpus / "*")], "holdout": 0.3, **options}, vocab)
    task.prepare(progress=False)
    return task


def as_bytes(ids: torch.Tensor) -> bytes:
    """The byte tokenizer's ids as bytes, one per token (EOS as NUL), so match positions are token positions."""
    return bytes(0 if i == EOS else i for i in ids.tolist())


examples = st.fixed_dictionaries({
    "facts": st.integers(1, 6),
    "digits": st.integers(1, 6),
    "extra": st.integers(0, 300),
    "depth": st.one_of(st.none(), st.floats(0, 1)),
    "seed": st.integers(0, 2**40),
})


@given(params=examples)
def test_the_answer_is_the_asked_fact_and_the_only_scored_tokens(corpus, params):
    task = qa(corpus, facts=params["facts"], digits=params["digits"])
    seq_len = task.min_seq_len() + params["extra"]
    ids, targets = task.example(seq_len, torch.Generator().manual_seed(params["seed"]), params["depth"])
    assert ids.shape == targets.shape == (seq_len,)
    text = as_bytes(ids)
    facts = list(FACT.finditer(text))
    numbers = {match[1]: match[2] for match in facts}
    assert len(facts) == len(numbers) == params["facts"]  # names distinct within an example
    assert all(len(number) == params["digits"] for number in numbers.values())
    answer = b" " + numbers[QUESTION.search(text[:-params["digits"] - 1])[1]]
    assert text.endswith(answer)
    scored = (targets != IGNORE).nonzero().flatten()
    assert scored.tolist() == list(range(seq_len - len(answer) - 1, seq_len - 1))
    assert torch.equal(targets[scored], ids[scored + 1])


@given(depth=st.floats(0, 1), seed=st.integers(0, 2**40), extra=st.integers(0, 300))
def test_the_asked_fact_sits_at_the_requested_depth(corpus, depth, seed, extra):
    task = qa(corpus, facts=3)
    seq_len = task.min_seq_len() + extra
    ids, _ = task.example(seq_len, torch.Generator().manual_seed(seed), depth)
    text = as_bytes(ids)
    question = text.rindex(b"\nQuestion:")
    facts = list(FACT.finditer(text))
    asked = next(match for match in facts
                 if text.startswith(b"\nQuestion: What is the secret number of " + match[1] + b"?", question))
    passages = question - sum(len(match[0]) for match in facts)
    before = asked.start() - sum(len(match[0]) for match in facts if match.start() < asked.start())
    assert before == round(depth * passages)


def test_examples_are_seeded_and_batches_are_rows_of_examples(corpus):
    task = qa(corpus)
    seq_len = task.min_seq_len() + 50
    first = task.batch(seq_len, [1, 2, 3])
    assert first.cu_seqlens is None and first.input_ids.shape == (3, seq_len)
    assert torch.equal(first.input_ids, task.batch(seq_len, [1, 2, 3]).input_ids)
    assert not torch.equal(first.input_ids[0], first.input_ids[1])
    assert torch.equal(first.input_ids[0], task.example(seq_len, torch.Generator().manual_seed(1))[0])
    packed = task.batch(2 * seq_len, [4], pack=True)
    assert packed.cu_seqlens is not None and packed.input_ids.shape == (1, 2 * seq_len)


def test_the_shortest_length_fits_the_longest_example_and_one_less_is_refused(corpus):
    task = qa(corpus, facts=5, digits=3)
    for seed in range(20):
        task.example(task.min_seq_len(), torch.Generator().manual_seed(seed))
    with pytest.raises(ValueError, match="seq_len .* too short"):
        task.example(task.min_seq_len() - 1, torch.Generator())


def test_a_subword_tokenizer_answers_with_the_ids_its_fact_holds(corpus):
    task = qa(corpus, tokenizer="bpe:300", vocab=300)
    for seed in range(5):
        ids, targets = task.example(task.min_seq_len() + 100, torch.Generator().manual_seed(seed))
        answer = targets[targets != IGNORE]
        windows = ids[:-len(answer)].unfold(0, len(answer), 1)
        assert bool((windows == answer).all(1).any())  # its fact states it, in the same ids


@pytest.mark.parametrize(("options", "key"), [({"facts": 0}, "facts"), ({"digits": 10}, "digits"),
                                              ({"files": []}, "files")])
def test_bad_options_name_the_key(corpus, options, key):
    with pytest.raises(OptionError) as error:
        make_task("qa", {"files": [str(corpus / "*")], **options}, 257)
    assert error.value.key == key


class Fixed(nn.Module):
    """A model that returns the same logits whatever it reads."""

    def __init__(self, logits):
        super().__init__()
        self.logits = logits

    def forward(self, input_ids, logits_to_keep=0):
        return self.logits[:, -logits_to_keep:] if logits_to_keep else self.logits


def test_exact_match_counts_rows_whose_every_answer_token_is_right():
    targets = torch.full((3, 6), IGNORE)
    targets[:, 3:5] = torch.tensor([[1, 2], [3, 4], [5, 6]])
    logits = torch.nn.functional.one_hot(targets.clamp(min=0), 8).float()
    logits[1, 4] = torch.nn.functional.one_hot(torch.tensor(0), 8)  # row 1: its second answer token wrong
    batch = Batch(torch.zeros(3, 6, dtype=torch.long), targets)
    off = torch.autocast("cpu", enabled=False)
    _, tokens, scored, answers = score(Fixed(logits), batch, off)
    _, exact, _, _ = score(Fixed(logits), batch, off, exact=True)
    assert (int(tokens), int(exact), scored, answers) == (5, 2, 6, 3)


def test_score_text_scores_every_next_token_and_counts_tokens(corpus):
    task = qa(corpus, score_text=True)
    ids, targets = task.example(task.min_seq_len() + 40, torch.Generator().manual_seed(3))
    assert torch.equal(targets[:-1], ids[1:]) and targets[-1] == IGNORE
    assert not task.exact and qa(corpus).exact


def test_a_split_shorter_than_the_passages_is_read_round_again(corpus):
    task = qa(corpus, split="eval")
    length = 3 * task.stream.total
    ids, _ = task.example(length, torch.Generator().manual_seed(0))
    assert ids.shape == (length,) and len(FACT.findall(as_bytes(ids))) == task.facts
