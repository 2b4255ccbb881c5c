"""The text task: formats, tokenizers, the shard cache (reused, rebuilt, never half-built),
document-level splits and packed rows that keep documents apart."""

import os
import sys

import numpy as np
import pytest
import torch

from layerzoo.errors import OptionError
from layerzoo.tasks import make_task
from layerzoo.tasks.text import load_tokenizer, train_bpe
from layerzoo.tasks.text import shards as shards_module
from tests.helpers.text_corpus import cache, write_corpus  # noqa: F401 (cache is a fixture)

EOS = 256


@pytest.fixture
def corpus(tmp_path, cache):  # noqa: F811
    return tmp_path / "corpus", write_corpus(tmp_path / "corpus")


def text_task(folder, vocab=257, **options):
    return make_task("text", {"files": [str(folder / "*")], **options}, vocab)


def test_every_format_is_read_and_stored_as_eos_then_bytes(corpus):
    folder, files = corpus
    task = text_task(folder)
    task.prepare(progress=False)
    expected = [text for name in sorted(files) for text in files[name]]
    stored = [task.shards.document(index) for index in range(len(task.shards.documents))]
    assert [bytes(doc[1:].astype(np.uint8)).decode() for doc in stored] == expected
    assert all(doc[0] == EOS for doc in stored)
    assert task.shards.documents[:, 3].tolist() == [len(text.encode()) for text in expected]


def test_splits_are_seeded_disjoint_documents(corpus):
    folder, _ = corpus
    train = text_task(folder, holdout=0.3)
    held = text_task(folder, holdout=0.3, split="eval")
    assert len(held.doc_ids) == 2 and not set(train.doc_ids) & set(held.doc_ids)
    assert sorted([*train.doc_ids, *held.doc_ids]) == list(range(7))
    assert set(text_task(folder, holdout=0.3, split="eval", split_seed=5).doc_ids) != set(held.doc_ids)


def test_packed_rows_keep_documents_apart(corpus):
    folder, _ = corpus
    task = text_task(folder, holdout=0.2)
    batch = task.batch(97, list(range(12)))
    assert torch.equal(batch.input_ids[:, 1:], batch.targets[:, :-1])
    ids = batch.input_ids.flatten()
    starts = set(batch.cu_seqlens[:-1].tolist())
    row_starts = set(range(0, ids.numel(), 97))
    # a sequence starts exactly at each row start and at each document's EOS, nowhere else
    assert starts == row_starts | set((ids == EOS).nonzero().flatten().tolist())
    assert batch.cu_seqlens[-1] == ids.numel()
    again = task.batch(97, list(range(12)))
    assert torch.equal(again.input_ids, batch.input_ids)
    assert text_task(folder, pack=False).batch(97, [0]).cu_seqlens is None


def test_the_cache_is_reused_and_rebuilt_when_a_file_or_the_tokenizer_changes(corpus, tmp_path):
    folder, _ = corpus
    first = text_task(folder).shards.folder
    stamp = os.stat(first / "shard-00000.bin").st_mtime_ns
    assert text_task(folder).shards.folder == first  # a new task object: the same cache, not rebuilt
    assert os.stat(first / "shard-00000.bin").st_mtime_ns == stamp
    with (folder / "a.txt").open("a") as file:
        file.write("\nmore")
    changed = text_task(folder).shards.folder
    assert changed != first
    bpe = train_bpe(["def f(): return 1\n"] * 20, 270, tmp_path / "tok")
    assert text_task(folder, vocab=270, tokenizer=str(bpe)).shards.folder not in (first, changed)


def test_an_interrupted_build_leaves_no_cache(corpus, monkeypatch):
    folder, _ = corpus

    def interrupted(self, encoded, texts):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(shards_module.ShardWriter, "add", interrupted)
        with pytest.raises(KeyboardInterrupt):
            text_task(folder).prepare(progress=False)
    root = shards_module.cache_root() / "shards"
    assert [path.name for path in root.iterdir() if not path.name.endswith(".lock")] == []
    text_task(folder).prepare(progress=False)
    assert len([path for path in root.iterdir() if path.is_dir()]) == 1


def test_a_killed_build_is_cleared_by_the_next(tmp_path):
    """A SIGKILLed builder leaves its partial folder (and releases the lock); the next builder removes it."""
    from layerzoo.tasks.text.cache import built

    folder = tmp_path / "key"
    (tmp_path / "key.partial-12345").mkdir()
    (tmp_path / "key.partial-12345" / "shard-00000.bin").write_bytes(b"half")
    built(folder, lambda partial: (partial / "meta.json").write_text("{}"))
    assert sorted(path.name for path in tmp_path.iterdir()) == ["key", "key.lock"]
    assert built(folder, lambda partial: pytest.fail("rebuilt")) == folder


def test_bpe_tokenizers_trained_by_spec_and_by_hand(corpus, tmp_path):
    folder, files = corpus
    task = text_task(folder, vocab=300, tokenizer="bpe:300", holdout=0.3)
    tokenizer = task.tokenizer_model
    assert tokenizer.vocab_size == 300
    document = task.shards.document(0)
    assert tokenizer.decode(document.tolist()) == files["a.txt"][0]
    assert tokenizer.token_bytes[document].sum() == len(files["a.txt"][0].encode())  # bits per byte count bytes exactly
    assert len(document) < len(files["a.txt"][0].encode())  # merges happened
    assert text_task(folder, vocab=300, tokenizer="bpe:300", holdout=0.3).tokenizer_model.identity == tokenizer.identity
    by_hand = load_tokenizer(str(train_bpe(["x = 1\n"] * 10, 260, tmp_path / "tok")))
    assert by_hand.encode_batch(["<|endoftext|>"])[0].tolist() != [by_hand.eos_id]  # text never becomes EOS


def test_unigram_entropy_of_the_training_tokens(corpus):
    folder, _ = corpus
    task = text_task(folder, holdout=0.3)
    tokens = np.concatenate([task.shards.document(int(index)) for index in task.doc_ids])
    p = np.bincount(tokens) / len(tokens)
    p = p[p > 0]
    assert task.unigram_entropy() == pytest.approx(float(-(p * np.log(p)).sum()))


@pytest.mark.parametrize("options, vocab, key, words", [
    ({"tokenizer": "bytes"}, 256, "tokenizer", "bytes has 257 tokens, more than the model's vocab_size 256"),
    ({"tokenizer": "bpe:100"}, 300, "tokenizer", "N >= 257"),
    ({"tokenizer": "/no/such/folder"}, 300, "tokenizer", "no tokenizer.json"),
    ({"files": ["/no/such/*.txt"]}, 257, "files", "no such file"),
    ({"field": "body"}, 257, "field", "no text field 'body'"),
])
def test_bad_options_are_one_line(corpus, options, vocab, key, words):
    folder, _ = corpus
    with pytest.raises(OptionError) as error:
        task = text_task(folder, vocab, **{"files": [str(folder / "*")], **options})
        task.prepare(progress=False)
    assert error.value.key == key and words in str(error.value) and "\n" not in str(error.value)


def test_parquet_without_pyarrow_is_one_line(corpus, monkeypatch):
    folder, _ = corpus
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(OptionError, match=r"d.parquet: reading Parquet needs pyarrow: pip install 'layerzoo\[text\]'"):
        text_task(folder).prepare(progress=False)


@pytest.mark.parametrize("pattern", ["*.py", "**/__init__.py", "json/[!_]*.py"])
def test_stdlib_files_are_the_standard_library_without_third_party_code(pattern):
    import glob
    import sysconfig
    from pathlib import Path

    from layerzoo.tasks.text import resolve_files

    root = Path(sysconfig.get_paths()["stdlib"])
    expected = sorted(root / path for path in glob.glob(pattern, root_dir=root, recursive=True)
                      if Path(path).parts[0] not in ("site-packages", "dist-packages"))
    assert resolve_files((f"stdlib:{pattern}",)) == expected
    assert pattern != "*.py" or root / "os.py" in expected


def build_in_another_process(folder: str, cache_folder: str) -> str:
    os.environ["LAYERZOO_CACHE"] = cache_folder
    task = make_task("text", {"files": [f"{folder}/*"], "tokenizer": "bpe:280"}, 280)
    task.prepare(progress=False)
    return str(task.shards.folder)


def test_concurrent_builders_share_one_build(corpus, cache):  # noqa: F811
    """As torchrun's ranks do: every process prepares; one builds under the lock, the others wait and open it."""
    import multiprocessing

    folder, _ = corpus
    with multiprocessing.get_context("fork").Pool(2) as pool:
        built = pool.starmap(build_in_another_process, [(str(folder), str(cache))] * 2)
    assert built[0] == built[1]
    assert len([path for path in (cache / "shards").iterdir() if path.is_dir()]) == 1
    assert len([path for path in (cache / "tokenizers").iterdir() if path.is_dir()]) == 1


def test_bpe_training_shows_its_progress_in_a_log_too(corpus, capsys):
    """On stderr whether or not it is a terminal (the tokenizers trainer's own bars draw on terminals only)."""
    folder, _ = corpus
    text_task(folder, vocab=300, tokenizer="bpe:300", holdout=0.3).prepare(progress=True)
    error = capsys.readouterr().err
    assert "training a byte-level BPE of 300 tokens" in error and "5/5" in error  # 7 documents, 2 held out
    assert "tokenizing" in error
    train_bpe(["x = 1\n"] * 10, 260, folder.parent / "tok", progress=True)
    assert "10 documents" in capsys.readouterr().err  # no total given: a count
