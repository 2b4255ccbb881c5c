"""A BPE tokenizer's batch encoder (what builds the token shards): the ids of the tokenizers
library's plain one-text encode, whatever the texts and their neighbours in the batch, and the
encoding done by the library's thread pool, not in the calling thread. Nothing here asserts a time.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings, strategies as st

from layerzoo.tasks.text import load_tokenizer, train_bpe
from layerzoo.tasks.text.tokenizer import BPE_EOS
from tests.helpers.text_corpus import document

tokenizers = pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def bpe(tmp_path_factory):
    """(layerzoo's tokenizer, the library's own Tokenizer read from the same file, as layerzoo
    reads it: special tokens' text encoded as text)."""
    texts = [document(seed, 200) + "\n\n    x = {'a': [1, 2.5e-3]}  # ünïcode ✓\r\n" for seed in range(40)]
    folder = train_bpe(texts, 400, tmp_path_factory.mktemp("bpe") / "tok")
    reference = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    reference.encode_special_tokens = True
    return load_tokenizer(str(folder)), reference


def one_by_one(reference, texts: list[str]) -> list[list[int]]:
    return [reference.encode(text, add_special_tokens=False).ids for text in texts]


# code-like pieces, whitespace runs of every kind, the EOS token's own text, and any character
pieces = st.sampled_from(["def", " f", "(x)", ":", "\n", "\n\n", "    ", "\t", "\r\n", " ", "  ", "'s", "123",
                          "é", "✓", "😀", BPE_EOS, "<|", "\u00a0", "\u2028", "\x1c"])
texts = st.lists(st.one_of(pieces, st.text(max_size=8)), max_size=40).map("".join)


@settings(max_examples=60, deadline=None)
@given(batch=st.lists(texts, max_size=12))
def test_batch_encoding_gives_the_ids_of_encoding_each_text_alone(bpe, batch):
    tokenizer, reference = bpe
    encoded = tokenizer.encode_batch(batch)
    assert [ids.tolist() for ids in encoded] == one_by_one(reference, batch)
    assert all(tokenizer.eos_id not in ids for ids in encoded)  # EOS's text is text: only separators are EOS


def test_long_documents_in_a_large_batch_give_the_same_ids(bpe):
    tokenizer, reference = bpe
    batch = [document(seed, 3000) * 3 for seed in range(60)]
    assert [ids.tolist() for ids in tokenizer.encode_batch(batch)] == one_by_one(reference, batch)


def main_thread_share(encode) -> float:
    """The calling thread's part of the CPU time the process spent in encode()."""
    thread, process = time.thread_time(), time.process_time()
    encode()
    return (time.thread_time() - thread) / max(time.process_time() - process, 1e-9)


def test_the_library_encodes_a_batch_on_its_thread_pool(bpe, monkeypatch):
    """Parallelism is on: the calling thread only waits for the library's pool and reads the ids
    back; with the library's parallelism turned off (it reads TOKENIZERS_PARALLELISM at each call)
    the same encode runs in the calling thread, which shows the measure tells the two apart."""
    tokenizer, _ = bpe
    batch = [document(seed, 4000) for seed in range(80)]
    tokenizer.encode_batch(batch[:4])  # the pool started
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    assert main_thread_share(lambda: tokenizer.encode_batch(batch)) < 0.5
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    assert main_thread_share(lambda: tokenizer.encode_batch(batch)) > 0.5
