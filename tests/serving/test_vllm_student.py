"""A converted Llama student (layerzoo convert: attention layers turned into SWA and Gated
DeltaNet, the rest of the teacher's weights kept) served by vLLM from the folder convert wrote:
layerzoo's tokens and log-probabilities; seeded sampling repeats itself."""

import pytest

pytest.importorskip("vllm", reason="vllm is not installed (docs/serving.md says how)")

from layerzoo.convert import convert
from layerzoo.hf import LayerzooForCausalLM
from tests.helpers.hf_teachers import TeacherCase, save_teacher
from tests.helpers.vllm_serving import check_against_layerzoo, greedy, prompts, served


@pytest.fixture(scope="module")
def student(tmp_path_factory):
    """The student's folder and its model: a 4-layer Llama (heads of 32, its head tied to its
    embedding) converted to swa, gated_deltanet, swa, gated_deltanet."""
    root = tmp_path_factory.mktemp("student")
    teacher = save_teacher(TeacherCase("llama", n_layers=4, n_heads=2, n_kv_heads=1, tied=True), root / "teacher")
    pattern = {"pattern": ["swa", "gated_deltanet"],
               "mixers": {"swa": {"window": 32, "backend": "sdpa"}, "gated_deltanet": {"backend": "chunkwise"}}}
    convert(teacher, pattern, root / "student")
    return root / "student", LayerzooForCausalLM.from_pretrained(root / "student").eval()


@pytest.fixture(scope="module")
def llm(student):
    with served(student[0], max_num_batched_tokens=64, max_num_seqs=4) as llm:
        yield llm


def test_the_student_serves_layerzoo_s_tokens(student, llm):
    token_lists = [[token % 96 for token in tokens] for tokens in prompts([3, 70, 130, 250], seed=1)]
    for prompt, (tokens, logprobs) in zip(token_lists, greedy(llm, token_lists, 10)):
        check_against_layerzoo(student[1], prompt, tokens, logprobs)


def test_seeded_sampling_repeats_itself(llm):
    from vllm import SamplingParams

    def sample(seed):
        params = SamplingParams(temperature=1.0, top_p=0.9, max_tokens=16, seed=seed, ignore_eos=True)
        outputs = llm.generate([{"prompt_token_ids": [5, 6, 7]}] * 2, params, use_tqdm=False)
        return [list(out.outputs[0].token_ids) for out in outputs]

    assert sample(3) == sample(3)
    assert sample(3) != sample(4)
