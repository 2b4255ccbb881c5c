"""SmolLM2-135M-Instruct (the real tier's GGUF) converted to SWA + Gated DeltaNet 1:1 and served
by vLLM from the folder convert wrote, with its own tokenizer: on the chat prompt, every greedy
token is layerzoo's argmax and its log-probability layerzoo's (fp32), and the text vLLM returns is
the tokenizer's decoding of those tokens."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from layerzoo.convert import convert
from layerzoo.hf import LayerzooForCausalLM
from tests.helpers.vllm_serving import check_against_layerzoo, greedy, served
from tests.helpers.real_models import smollm2_folder
from tests.real.chat import chat_ids

NEW_TOKENS = 8
# Every layer converted: SWA (heads of 64, a window shorter than the prompt) and Gated DeltaNet 1:1.
PATTERN = {"mixers": {"swa": {"type": "swa", "window": 16}}, "pattern": "swa,gated_deltanet"}


def test_a_converted_smollm2_serves_layerzoo_s_tokens_and_text(tmp_path):
    from transformers import AutoTokenizer

    convert(smollm2_folder(), PATTERN, tmp_path / "student")
    model = LayerzooForCausalLM.from_pretrained(tmp_path / "student").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "student")
    prompt = chat_ids(tokenizer)[0].tolist()
    with served(tmp_path / "student", skip_tokenizer_init=False, max_num_batched_tokens=32) as llm:
        [(tokens, logprobs)] = greedy(llm, [prompt], NEW_TOKENS)
        from vllm import SamplingParams

        [output] = llm.generate([{"prompt_token_ids": prompt}],
                                SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, ignore_eos=True), use_tqdm=False)
    check_against_layerzoo(model, prompt, tokens, logprobs)
    assert output.outputs[0].text == tokenizer.decode(tokens, skip_special_tokens=True)
