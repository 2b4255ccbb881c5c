"""Served in bf16, vLLM's greedy tokens are layerzoo's choices within bf16's rounding: each token's
fp32 log-probability under layerzoo (on the tokens vLLM chose) is within BF16_TOLERANCE of the
best one's, and vLLM's own log-probability within it of layerzoo's. Its tokens need not be
layerzoo's bf16 argmax (docs/serving.md's trap: the kernels round in other places)."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from tests.helpers.vllm_serving import check_against_layerzoo, greedy, prompts, save_model, served

BF16_TOLERANCE = 0.05  # log-probability: bf16's 8-bit mantissa through a few layers of a tiny model


def test_a_bf16_hybrid_serves_layerzoo_s_choices_within_bf16_rounding(tmp_path):
    model = save_model(tmp_path, ["swa", "gated_deltanet", "mlstm", "attention"])
    token_lists = prompts([5, 80, 200])
    with served(tmp_path, dtype="bfloat16", max_num_batched_tokens=64, max_num_seqs=4) as llm:
        answers = greedy(llm, token_lists, 8)
    for prompt, (tokens, logprobs) in zip(token_lists, answers):
        check_against_layerzoo(model, prompt, tokens, logprobs, tolerance=BF16_TOLERANCE, tie=BF16_TOLERANCE)
