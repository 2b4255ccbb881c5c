"""SmolLM2-135M-Instruct from its GGUF: kept-attention conversion equals transformers' model
(logits and the greedy chat answer), and the converted folder loads with AutoModelForCausalLM and
AutoTokenizer, chat template included."""

import pytest
import torch

from tests.real.chat import chat_ids

pytestmark = pytest.mark.real

NEW_TOKENS = 12


@pytest.fixture(scope="module")
def converted(smollm2_gguf, tmp_path_factory):
    from layerzoo.convert import convert

    out = tmp_path_factory.mktemp("smollm2") / "attention"
    return convert(smollm2_gguf, "attention", out), out


@pytest.fixture(scope="module")
def reference(smollm2_folder):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(smollm2_folder).eval(), AutoTokenizer.from_pretrained(smollm2_folder)


def test_kept_attention_equals_transformers_logits(converted, reference):
    conversion, _ = converted
    model, tokenizer = reference
    ids = chat_ids(tokenizer)
    with torch.no_grad():
        ours, theirs = conversion.student(ids), model(ids).logits
    assert conversion.converted == ()
    assert ((ours - theirs).pow(2).mean() / theirs.pow(2).mean()).sqrt() < 1e-5


def test_the_exported_folder_answers_the_chat_question_as_transformers_does(converted, reference):
    import layerzoo.hf  # noqa: F401  (registers the Auto classes)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    _, folder = converted
    model, tokenizer = reference
    ours = AutoModelForCausalLM.from_pretrained(folder).eval()
    our_tokenizer = AutoTokenizer.from_pretrained(folder)
    ids = chat_ids(our_tokenizer)
    assert torch.equal(ids, chat_ids(tokenizer))  # the chat template came along
    with torch.no_grad():
        answer = ours.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[0, ids.shape[1]:]
        expected = model.generate(ids, max_new_tokens=NEW_TOKENS, do_sample=False)[0, ids.shape[1]:]
    assert answer.tolist() == expected.tolist()
    assert "Paris" in our_tokenizer.decode(answer)
