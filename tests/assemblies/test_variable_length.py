"""Sequences of different lengths through whole models: padded batches, packed rows, batched
generation, for every shipped tiny spec."""

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import layerzoo
from layerzoo.specs.files import shipped_specs
from layerzoo.testing import assert_close, padded_batch

TINY = [name for name in shipped_specs() if name.endswith("-tiny")]

# A row alone takes other paths than in a batch (one token: the step loop; shorter matmuls), and a
# model's rounding grows through its layers: at init, queries and keys that are nearly orthogonal
# cancel to dot products far below their terms, so the logits keep many times one layer's rounding.
# A leak between rows moves logits by their own size, far past this.
WHOLE_MODEL = 10.0


@pytest.fixture(scope="module", params=TINY)
def model(request):
    torch.manual_seed(0)
    return layerzoo.build(request.param).eval()


def prompts_of(lengths: list[int], vocab: int, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(vocab, (length,), generator=gen) for length in lengths]


@given(lengths=st.lists(st.integers(1, 20), min_size=1, max_size=4), seed=st.integers(0, 2**16),
       side=st.sampled_from(["left", "right"]))
def test_a_padded_batch_gives_each_row_its_logits_alone(model, lengths, seed, side):
    prompts = prompts_of(lengths, model.config.vocab_size, seed)
    batch, mask = padded_batch(prompts, side)
    with torch.no_grad():
        logits = model(batch, attention_mask=mask)
        for index, prompt in enumerate(prompts):
            assert_close(logits[index][mask[index] == 1], model(prompt[None])[0], what=f"row {index}", scale=WHOLE_MODEL)
        assert not logits[mask == 0].any()


@pytest.mark.parametrize("keep", [1, 3])
def test_logits_to_keep_gives_the_last_columns_of_a_padded_batch(model, keep):
    batch, mask = padded_batch(prompts_of([6, 2, 4], model.config.vocab_size, seed=3), "left")
    with torch.no_grad():
        assert_close(model(batch, attention_mask=mask, logits_to_keep=keep), model(batch, attention_mask=mask)[:, -keep:])
        assert_close(model(batch, logits_to_keep=keep), model(batch)[:, -keep:])


@given(lengths=st.lists(st.integers(1, 20), min_size=1, max_size=4), seed=st.integers(0, 2**16))
def test_documents_packed_into_one_row_see_nothing_of_each_other(model, lengths, seed):
    documents = prompts_of(lengths, model.config.vocab_size, seed)
    cu_seqlens = torch.tensor([0, *torch.tensor(lengths).cumsum(0).tolist()])
    with torch.no_grad():
        logits = model(torch.cat(documents)[None], cu_seqlens=cu_seqlens)[0]
        for index, document in enumerate(documents):
            start = cu_seqlens[index]
            assert_close(logits[start:start + len(document)], model(document[None])[0], what=f"document {index}",
                         scale=WHOLE_MODEL)


@pytest.mark.parametrize("prefill_chunk_size", [None, 4])
def test_left_padded_prompts_generate_what_each_generates_alone(model, prefill_chunk_size):
    prompts = prompts_of([5, 1, 11, 3], model.config.vocab_size, seed=1)
    batch, mask = padded_batch(prompts, "left")
    generated = model.generate(batch, 12, attention_mask=mask, prefill_chunk_size=prefill_chunk_size)
    for index, prompt in enumerate(prompts):
        alone = model.generate(prompt[None], 12)
        assert torch.equal(generated[index, batch.shape[1]:], alone[0, len(prompt):]), f"row {index}"


@pytest.mark.parametrize("prefill_chunk_size", [None, 3])
def test_right_padded_prompts_continue_from_their_last_real_token(model, prefill_chunk_size):
    prompts = prompts_of([2, 6, 4], model.config.vocab_size, seed=2)
    batch, mask = padded_batch(prompts, "right")
    generated = model.generate(batch, 5, attention_mask=mask, prefill_chunk_size=prefill_chunk_size)
    for index, prompt in enumerate(prompts):
        assert torch.equal(generated[index, batch.shape[1]:], model.generate(prompt[None], 5)[0, len(prompt):])


@pytest.mark.parametrize("mask,message", [
    (torch.ones(2, 3), r"attention_mask must be \(2, 4\)"),
    (torch.full((2, 4), 2), r"attention_mask must hold only 0 \(padding\) and 1 \(real tokens\)"),
    (torch.tensor([[1, 1, 1, 1], [0, 0, 0, 0]]), r"every prompt needs at least one real token"),
])
def test_a_bad_attention_mask_is_a_one_line_error(mask, message):
    model = layerzoo.build("swa-tiny")
    with pytest.raises(ValueError, match=message) as info:
        model.generate(torch.zeros(2, 4, dtype=torch.long), 2, attention_mask=mask)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("cu_seqlens,message", [
    (torch.tensor([0, 2, 3]), r"cu_seqlens must run from 0 to T = 4"),
    (torch.tensor([0, 3, 2, 4]), r"cu_seqlens must be non-decreasing"),
    (torch.tensor([0.0, 4.0]), r"cu_seqlens must be a 1-D int32 or int64 tensor"),
])
def test_bad_cu_seqlens_are_a_one_line_error(cu_seqlens, message):
    model = layerzoo.build("swa-tiny")
    with pytest.raises(ValueError, match=message) as info:
        model(torch.zeros(1, 4, dtype=torch.long), cu_seqlens=cu_seqlens)
    assert "\n" not in str(info.value)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", TINY)
def test_on_cuda_padded_and_packed_batches_equal_their_rows_alone(name):
    torch.manual_seed(0)
    model = layerzoo.build(name, device="cuda").eval()
    prompts = [p.cuda() for p in prompts_of([7, 1, 70, 33], model.config.vocab_size, seed=3)]
    batch, mask = padded_batch([p.cpu() for p in prompts], "left")
    cu_seqlens = torch.tensor([0, 7, 8, 78, 111], device="cuda")
    with torch.no_grad():
        padded = model(batch.cuda(), attention_mask=mask.cuda())
        packed = model(torch.cat(prompts)[None], cu_seqlens=cu_seqlens)[0]
        for index, prompt in enumerate(prompts):
            alone = model(prompt[None])[0]
            assert_close(padded[index][mask[index].cuda() == 1], alone, what=f"padded row {index}")
            assert_close(packed[cu_seqlens[index]:cu_seqlens[index + 1]], alone, what=f"packed sequence {index}")
    generated = model.generate(batch.cuda(), 8, attention_mask=mask.cuda())
    for index, prompt in enumerate(prompts):
        assert torch.equal(generated[index, batch.shape[1]:], model.generate(prompt[None], 8)[0, len(prompt):])
