"""The reliance measure and the divergences under it: KL properties, zeroing a layer's mixer, and
the loss rising when a layer that matters is zeroed and not when one that is bypassed is."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import layerzoo
from layerzoo.tasks import make_task
from layerzoo.testing import assert_close
from layerzoo.training.objectives.divergence import divergence_sums
from layerzoo.training.distill.reliance import format_reliance, recurrent_layers, reliance, zeroed
from tests.helpers.conversion import VOCAB, write_text, write_tokenizer

HYBRID = {"model": {"d_model": 32, "n_layers": 3, "vocab_size": VOCAB, "layers": ["attention", "gdn", "gdn"],
                    "mixers": {"attention": {"n_heads": 2}, "gdn": {"type": "gated_deltanet", "n_heads": 2}},
                    "ffn": {"hidden": 64}}}


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    folder = tmp_path_factory.mktemp("text")
    corpus = write_text(folder / "corpus")
    text = make_task("text", {"files": [str(corpus / "*.txt")], "holdout": 0.25,
                              "tokenizer": str(write_tokenizer(corpus, folder / "tokenizer"))}, VOCAB)
    return dataclasses.replace(text, split="eval")


@given(st.integers(1, 3), st.integers(2, 5), st.integers(2, 9), st.floats(0.25, 4.0), st.integers(0, 2**16))
def test_kl_is_zero_to_itself_positive_otherwise_and_scaled_by_temperature_squared(batch, length, vocab, temperature, seed):
    generator = torch.Generator().manual_seed(seed)
    teacher = torch.randn(batch, length, vocab, generator=generator, dtype=torch.float64)
    student = teacher + torch.randn(batch, length, vocab, generator=generator, dtype=torch.float64)
    targets = torch.randint(0, vocab, (batch, length), generator=generator)
    targets[0, 0] = -100  # not scored
    kl_self, _, count = divergence_sums(teacher, teacher, targets, temperature)
    assert kl_self.item() == 0.0 and count == batch * length - 1
    kl, ce, _ = divergence_sums(student, teacher, targets, temperature)
    kl_plain, _, _ = divergence_sums(student / temperature, teacher / temperature, targets, 1.0)
    assert kl.item() > 0
    assert_close(kl, kl_plain * temperature**2, torch.float32)
    assert_close(ce, divergence_sums(student, teacher, targets, 1.0)[1], torch.float32)  # CE at temperature 1 always


@given(st.integers(0, 2), st.integers(1, 6), st.integers(0, 2**16))
def test_a_zeroed_layer_passes_its_mixer_by(layer, length, seed):
    torch.manual_seed(seed)
    model = layerzoo.build(HYBRID).eval()
    ids = torch.randint(0, VOCAB, (2, length))
    with torch.no_grad():
        with zeroed(model, layer):
            logits = model(ids)
        x = model.embedding(ids)
        for index, block in enumerate(model.blocks):  # by hand: block `layer` without its mixer
            x = x + (0 if index == layer else block.mixer(block.mixer_norm(x)))
            x = x + block.ffn(block.ffn_norm(x))
        assert_close(logits, model.head(model.final_norm(x)), torch.float32)
        assert not torch.equal(model(ids), logits)  # and the hook is gone after the block


def test_zeroing_a_layer_that_matters_raises_loss_and_kl_and_one_that_is_bypassed_does_not(task):
    torch.manual_seed(0)
    model = layerzoo.build(HYBRID)
    assert recurrent_layers(model) == [1, 2]
    with torch.no_grad():
        model.blocks[1].mixer.o_proj.weight.mul_(30.0)  # layer 1 carries much of the residual stream
        model.blocks[2].mixer.o_proj.weight.zero_()  # layer 2 adds nothing: a bypassed branch
    result = reliance(model, task, 32, teacher=model, samples=4, batch_size=4)
    intact, (matters, bypassed) = result["intact"], result["layers"]
    assert intact["kl"] == 0.0  # the model against itself
    assert matters["layer"] == 1 and matters["mixer"] == "gated_deltanet"
    assert matters["kl_increase"] > 1e-2 and abs(matters["loss_increase"]) > 1e-3
    assert bypassed["kl_increase"] == 0.0 and bypassed["loss_increase"] == 0.0
    table = format_reliance(result)
    assert table.splitlines()[1].startswith("none (intact)") and len(table.splitlines()) == 4


def test_reliance_without_a_teacher_and_of_chosen_layers(task):
    torch.manual_seed(0)
    model = layerzoo.build(HYBRID)
    result = reliance(model, task, 16, layers=[0], samples=2, batch_size=2)
    assert result["intact"]["kl"] is None and result["layers"][0]["kl_increase"] is None
    assert result["layers"][0]["mixer"] == "attention"
    with pytest.raises(ValueError, match="layer 3 is out of range: the model has 3 layers"):
        reliance(model, task, 16, layers=[3])
