"""Gemma-3-270M from its GGUF: converted with every layer kept (sliding layers as swa, global ones
as attention), layerzoo's model equals transformers' Gemma3ForCausalLM, past the sliding window
too; converted to a hybrid, its kept layers still equal the teacher's and it generates."""

import pytest
import torch

pytestmark = pytest.mark.real

KEPT = "swa*5,attention"  # Gemma-3's own layout: five sliding layers, then a global one
PROMPT = "The capital of France is"
NEW_TOKENS = 8


@pytest.fixture(scope="module")
def kept(gemma3_gguf):
    from layerzoo.convert import convert

    return convert(gemma3_gguf, KEPT)


@pytest.fixture(scope="module")
def reference(gemma3_folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(gemma3_folder).eval(), AutoTokenizer.from_pretrained(gemma3_folder)


def relative_rms(ours: torch.Tensor, theirs: torch.Tensor) -> float:
    return float(((ours - theirs).pow(2).mean() / theirs.pow(2).mean()).sqrt())


def test_kept_layers_are_the_teachers_own(kept):
    kinds = [layer.type for layer in kept.student.config.layers]
    assert kept.converted == () and kinds == (["swa"] * 5 + ["attention"]) * 3
    assert {layer.options["window"] for layer in kept.student.config.layers if layer.type == "swa"} == {512}


def test_kept_attention_equals_transformers_logits_past_the_window(kept, reference):
    model, tokenizer = reference
    ids = torch.randint(3, tokenizer.vocab_size, (1, 600), generator=torch.Generator().manual_seed(0))
    ids[0, 0] = tokenizer.bos_token_id
    with torch.no_grad():
        ours, theirs = kept.student(ids), model(ids).logits
    assert relative_rms(ours, theirs) < 1e-5


def test_greedy_continuation_equals_transformers(kept, reference):
    model, tokenizer = reference
    ids = tokenizer(PROMPT, return_tensors="pt").input_ids
    assert ids[0, 0] == tokenizer.bos_token_id  # Gemma needs its BOS; the tokenizer adds it
    with torch.no_grad():
        ours = kept.student.generate(ids, max_new_tokens=NEW_TOKENS)[0, ids.shape[1]:]
        theirs = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[0, ids.shape[1]:]
    assert ours.tolist() == theirs.tolist()
    assert "Paris" in tokenizer.decode(ours) or "capital" in tokenizer.decode(ours)


def test_a_hybrid_keeps_the_sliding_layers_and_generates(gemma3_gguf, kept, tmp_path):
    from layerzoo.convert import convert

    hybrid = convert(gemma3_gguf, "swa*5,gated_deltanet", tmp_path / "hybrid")
    assert hybrid.converted == (5, 11, 17)
    ids = torch.randint(3, 1000, (1, 32), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        states_kept, states_hybrid = [], []
        kept.student(ids, hidden_states=states_kept)
        hybrid.student(ids, hidden_states=states_hybrid)
        torch.testing.assert_close(states_hybrid[5], states_kept[5], rtol=0, atol=0)  # layers 0-4 are the teacher's
        out = hybrid.student.generate(ids, max_new_tokens=4)
    assert out.shape == (1, 36) and bool(torch.isfinite(hybrid.student(out)).all())
