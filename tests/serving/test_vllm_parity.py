"""vLLM serving a layerzoo folder gives layerzoo's own tokens and log-probabilities (fp32): every
mixer in one hybrid and each recurrent mixer alone, prompts of 1 to 300 tokens cut into 64-token
prefill chunks (so the SWA window and the recurrent states cross chunk boundaries), four
sequences at once."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from tests.helpers.vllm_serving import MIXERS, check_against_layerzoo, greedy, prompts, save_model, served

LENGTHS = [1, 37, 150, 300]  # four sequences in every step, prefilled in 64-token chunks
NEW_TOKENS = 12
EVERY_MIXER = ["swa", "gated_deltanet", "attention", "kda", "mamba2", "mlstm", "assoc_memory"]


def check_model(folder, model, lengths=LENGTHS, **options) -> None:
    token_lists = prompts(lengths)
    with served(folder, max_num_batched_tokens=64, max_num_seqs=4, **options) as llm:
        first = greedy(llm, token_lists, NEW_TOKENS)
        for prompt, (tokens, logprobs) in zip(token_lists, first):
            assert len(tokens) == NEW_TOKENS
            check_against_layerzoo(model, prompt, tokens, logprobs)
        # the same prompts again, in the state slots the first ones left: each starts from the empty state
        assert [tokens for tokens, _ in greedy(llm, token_lists[::-1], NEW_TOKENS)] == [tokens for tokens, _ in first[::-1]]


def test_every_mixer_in_one_hybrid(tmp_path):
    check_model(tmp_path, save_model(tmp_path, EVERY_MIXER))


@pytest.mark.parametrize("mixer", sorted(set(MIXERS) - {"swa", "attention"}))
def test_each_recurrent_mixer_alone(tmp_path, mixer):
    check_model(tmp_path, save_model(tmp_path, [mixer]), lengths=[1, 90, 200])


def test_full_attention_alone_keeps_prefix_caching(tmp_path):
    """Full attention alone: vLLM runs it as a plain decoder (no state cache), prefix caching on;
    the second round of the same prompts (their prefixes cached) gives the same tokens."""
    check_model(tmp_path, save_model(tmp_path, ["attention", "attention"]), lengths=[1, 90, 200], enable_prefix_caching=True)


def test_attention_layers_alone(tmp_path):
    """SWA and full attention, no recurrent layer: a hybrid to vLLM with no state to cache."""
    check_model(tmp_path, save_model(tmp_path, ["swa", "attention"]), lengths=[1, 90, 200])
