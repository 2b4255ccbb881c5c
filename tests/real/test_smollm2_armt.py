"""ARMT wrapped around SmolLM2-135M-Instruct from its GGUF file: the first segment's logits are
the base's (the memory starts neutral), a backward gives the memory gradients and the frozen base
none, generation answers the chat prompt as the base does and stops at `<|im_end|>`, and an
adapter saved and loaded onto the base again gives the same logits."""

import pytest
import torch

from tests.real.chat import chat_ids

pytestmark = pytest.mark.real

SEGMENT = 64  # longer than the chat prompt and its answer: generation stays in the first segment
MAX_NEW_TOKENS = 24


@pytest.fixture(scope="module")
def armt(smollm2_gguf):
    from layerzoo.assemblies.armt import wrap

    return wrap(smollm2_gguf, segment_size=SEGMENT, num_mem_tokens=4, memory_layers=[-1])


@pytest.fixture(scope="module")
def tokenizer(smollm2_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder)


def two_segments(vocab_size: int) -> torch.Tensor:
    """(1, 1.5 segments) of seeded token ids."""
    return torch.randint(0, vocab_size, (1, SEGMENT * 3 // 2), generator=torch.Generator().manual_seed(0))


def test_forward_is_the_base_in_the_first_segment_and_backward_reaches_the_memory_only(armt):
    ids = two_segments(armt.config.vocab_size)
    with torch.no_grad():
        logits, base = armt(ids), armt.base(ids[:, :SEGMENT]).logits
    assert logits.shape == (1, ids.shape[1], armt.config.vocab_size) and torch.isfinite(logits).all()
    torch.testing.assert_close(logits[:, :SEGMENT], base, rtol=1e-4, atol=1e-4)

    armt(ids, labels=ids).backward()
    memory = dict(armt.named_parameters())  # the frozen base's parameters are not trainable: listed, without grads
    try:
        grads = {name: p.grad for name, p in memory.items() if not name.startswith("base.")}
        assert grads and all(grad is not None and torch.isfinite(grad).all() for grad in grads.values())
        assert any(grad.abs().sum() > 0 for grad in grads.values())
        assert all(p.grad is None and not p.requires_grad for name, p in memory.items() if name.startswith("base."))
    finally:
        armt.zero_grad(set_to_none=True)


def test_generate_answers_the_chat_prompt_as_the_base_and_stops_at_im_end(armt, tokenizer):
    ids = chat_ids(tokenizer)
    im_end = tokenizer.convert_tokens_to_ids("<|im_end|>")
    assert im_end in armt.end_token_ids()
    with torch.no_grad():
        answer = armt.generate(ids, max_new_tokens=MAX_NEW_TOKENS)[0, ids.shape[1]:].tolist()
        expected = armt.base.generate(ids, max_new_tokens=MAX_NEW_TOKENS, do_sample=False,
                                      eos_token_id=im_end)[0, ids.shape[1]:].tolist()
    assert answer == expected
    assert len(answer) < MAX_NEW_TOKENS and answer[-1] == im_end and im_end not in answer[:-1]
    assert "Paris" in tokenizer.decode(answer)


def test_an_adapter_saved_and_loaded_again_gives_the_same_logits(armt, smollm2_folder, tmp_path):
    from layerzoo.assemblies.armt import load_adapter, save_adapter

    before = {name: tensor.clone() for name, tensor in armt.adapter_state_dict().items()}
    generator = torch.Generator().manual_seed(1)
    try:
        with torch.no_grad():  # a memory that is not the neutral one it starts as, so that loading it shows
            for tensor in armt.adapter_state_dict().values():
                tensor.add_(torch.randn(tensor.shape, generator=generator) * 0.05)
        save_adapter(armt, tmp_path / "adapter.safetensors")
        restored = load_adapter(smollm2_folder, tmp_path / "adapter.safetensors")
        ids = two_segments(armt.config.vocab_size)
        with torch.no_grad():
            ours, theirs = armt(ids), restored(ids)
        torch.testing.assert_close(theirs, ours, rtol=0, atol=0)
        assert not torch.allclose(ours[:, SEGMENT:], armt.base(ids[:, SEGMENT:]).logits, atol=1e-3)
    finally:
        armt.load_state_dict(before, strict=False)
