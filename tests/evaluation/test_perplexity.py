"""Perplexity against context length: 16k tokens stream through a tiny model in constant memory,
and the numbers add up."""

import math

import pytest
import torch

import layerzoo
from layerzoo.tasks import make_task
from layerzoo.evaluation.perplexity import perplexity_by_length
from tests.helpers.text_corpus import cache, document  # noqa: F401 (cache is a fixture)

TINY = ["model.d_model=32", "model.n_layers=2", "model.vocab_size=257", "model.mixers.swa.n_heads=2",
        "model.mixers.swa.n_kv_heads=1", "model.mixers.swa.window=16", "model.mixers.mlstm.n_heads=2",
        "model.mixers.mlstm.chunk_size=64"]


@pytest.fixture
def long_documents(tmp_path, cache):  # noqa: F811
    """Two documents of more than 16k bytes; holdout 0.5 keeps one for evaluation."""
    for seed in range(2):
        (tmp_path / f"{seed}.txt").write_text(document(seed, 3000))
    return make_task("text", {"files": [str(tmp_path / "*.txt")], "holdout": 0.5, "split": "eval"}, 257)


def state_elements(state) -> int:
    if isinstance(state, torch.Tensor):
        return state.numel()
    if isinstance(state, (list, tuple)):
        return sum(map(state_elements, state))
    if hasattr(state, "__dataclass_fields__"):
        return sum(state_elements(getattr(state, name)) for name in state.__dataclass_fields__)
    return 0


def test_16k_tokens_stream_in_constant_memory(long_documents):
    torch.manual_seed(0)
    model = layerzoo.build("swax-tiny", TINY)
    pieces, states = [], []
    forward = model.forward

    def watched(ids, state=None, return_state=False, **kwargs):
        logits, new_state = forward(ids, state, True, **kwargs)
        pieces.append(ids.shape[1])
        states.append(state_elements(new_state))
        return (logits, new_state) if return_state else logits

    model.forward = watched
    result = perplexity_by_length(model, long_documents, [256, 4096, 16384], chunk_size=1024, window=16)
    assert sum(pieces) == 16384 and max(pieces) == 1024  # the model never sees more than a piece
    assert len(set(states)) == 1, states  # SWA's window and the mLSTM's matrices: the same size at 1k and 16k
    rows = {row["length"]: row for row in result["lengths"]}
    assert all(row["documents"] == 1 and row["tokens"] == length for length, row in rows.items())
    for row in [*rows.values(), *result["buckets"]]:
        assert row["perplexity"] == pytest.approx(math.exp(row["loss"]))
        assert row["bits_per_byte"] == pytest.approx(row["loss"] / math.log(2), rel=0.01)  # ASCII but for the é
    buckets = result["buckets"]
    assert [(row["first"], row["last"]) for row in buckets[:3]] == [(0, 0), (1, 1), (2, 3)]
    assert (buckets[-1]["first"], buckets[-1]["last"], result["bucket_length"]) == (8192, 16383, 16384)
    assert sum(row["tokens"] for row in buckets) == 16384
    total = sum(row["loss"] * row["tokens"] for row in buckets) / 16384
    assert rows[16384]["loss"] == pytest.approx(total)


def test_pieces_equal_one_pass(long_documents):
    torch.manual_seed(0)
    model = layerzoo.build("swax-tiny", TINY)
    small = perplexity_by_length(model, long_documents, [700], chunk_size=128, window=16)
    whole = perplexity_by_length(model, long_documents, [700], chunk_size=1024, window=16)
    assert small["lengths"][0]["loss"] == pytest.approx(whole["lengths"][0]["loss"], rel=1e-4)


def test_a_length_no_document_reaches_is_reported_empty(long_documents):
    model = layerzoo.build("swax-tiny", TINY)
    result = perplexity_by_length(model, long_documents, [64, 10**6], chunk_size=512)
    assert result["lengths"][1] == {"length": 10**6, "documents": 0, "tokens": 0, "loss": None, "perplexity": None,
                                    "bits_per_byte": None, "document_losses": []}
    assert result["bucket_length"] == 64


def test_each_documents_loss_is_its_own_and_they_average_to_the_lengths(tmp_path, cache):  # noqa: F811
    for seed in range(6):
        (tmp_path / f"{seed}.txt").write_text(document(seed, 200 + 50 * seed))
    task = make_task("text", {"files": [str(tmp_path / "*.txt")], "holdout": 0.5, "split": "eval"}, 257)
    torch.manual_seed(0)
    model = layerzoo.build("swax-tiny", TINY)
    both = perplexity_by_length(model, task, [300], samples=3, chunk_size=128, window=16)["lengths"][0]
    first = perplexity_by_length(model, task, [300], samples=1, chunk_size=128, window=16)["lengths"][0]
    assert both["documents"] == len(both["document_losses"]) >= 2
    assert sum(both["document_losses"]) / both["documents"] == pytest.approx(both["loss"])
    assert first["document_losses"] == [pytest.approx(both["document_losses"][0])]  # the same seeded order
    assert len(set(both["document_losses"])) == both["documents"]  # other text, other losses
