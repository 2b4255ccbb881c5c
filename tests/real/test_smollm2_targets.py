"""Every conversion target on SmolLM2-135M-Instruct, converted beside kept attention and an SWA
layer: two steps of alignment train the converted mixers and nothing else, and the student
generates from the chat prompt; one distils a step end to end, the whole student trained (LoRA
needs peft, which CI's test extra leaves out; tests/hf/test_gguf.py runs
`distill_folder` on a GGUF file's conversion, the tokenizer and chat template carried)."""

import math

import pytest
import torch
from safetensors import safe_open

from layerzoo.registry import list_targets
from tests.real.chat import chat_ids

pytestmark = pytest.mark.real

TARGETS = sorted(set(list_targets()) - {"attention"})
CONVERTED = (14, 28, 29)
WINDOW = 16  # SWA's window, under the sequences' length: the SWA layer differs from the teacher's and trains
SEQ_LEN = 64
NEW_TOKENS = 4
DATA = {"files": ["stdlib:json/*.py"], "holdout": 0.2}
EVAL = {"samples": 1, "batch_size": 1}
ALIGN = {"data": DATA, "align": {"steps": 2, "batch_size": 1, "seq_len": SEQ_LEN}, "end_to_end": None, "eval": EVAL}
END_TO_END = {"data": DATA, "align": None, "eval": EVAL, "end_to_end": {"steps": 1, "batch_size": 1, "seq_len": SEQ_LEN}}


def pattern(kind: str) -> dict:
    """Layers 14 and 29 (the last) become `kind`, layer 28 SWA, the others keep their attention."""
    return {"mixers": {"swa": {"type": "swa", "window": WINDOW}}, "pattern": f"attention; swa@-2; {kind}@14,-1"}


@pytest.fixture(scope="module")
def tokenizer(smollm2_folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(smollm2_folder)


def checkpoint_tensors(stage_dir, step: int) -> list[str]:
    """The names of the tensors a stage's checkpoint of `step` holds."""
    from layerzoo.training.runs.run_checkpoints import checkpoint_dir

    with safe_open(str(checkpoint_dir(stage_dir, step) / "model.safetensors"), framework="pt") as file:
        return list(file.keys())


def assert_generates(model, ids: torch.Tensor, vocab_size: int) -> None:
    """A CausalLM's finite logits on `ids` (1, T), and NEW_TOKENS greedy tokens of the vocabulary after them."""
    with torch.no_grad():
        logits, out = model(ids), model.generate(ids, max_new_tokens=NEW_TOKENS)
    assert logits.shape == (1, ids.shape[1], vocab_size) and torch.isfinite(logits).all()
    assert out.shape == (1, ids.shape[1] + NEW_TOKENS) and torch.equal(out[:, :ids.shape[1]], ids)
    assert ((out >= 0) & (out < vocab_size)).all()


@pytest.mark.parametrize("kind", TARGETS)
def test_each_target_converts_aligns_and_generates(kind, smollm2_folder, tokenizer, tmp_path):
    from layerzoo.convert import convert
    from layerzoo.training.distill.config import distillation_spec
    from layerzoo.training.distill.run import distill

    conversion = convert(smollm2_folder, pattern(kind))
    assert conversion.converted == CONVERTED
    result = distill(conversion, distillation_spec(conversion.student.config, ALIGN), tmp_path / "run", progress=False)

    trained = {".".join(name.split(".")[:3]) for name in checkpoint_tensors(tmp_path / "run" / "align", 2)}
    assert trained == {f"blocks.{index}.mixer" for index in CONVERTED}
    report = result.report
    assert report["tokens"]["total"] == 2 * SEQ_LEN
    assert math.isfinite(report["heldout"]["align"]["eval_loss"])
    recurrent = [] if kind == "swa" else [(14, kind), (29, kind)]
    assert [(row["layer"], row["mixer"]) for row in report["reliance"]["layers"]] == recurrent
    assert_generates(result.student.eval(), chat_ids(tokenizer), conversion.student.config.vocab_size)


def test_a_conversion_distils_end_to_end(smollm2_folder, tokenizer, tmp_path):
    from layerzoo.convert import convert
    from layerzoo.training.distill.config import distillation_spec
    from layerzoo.training.distill.run import distill

    conversion = convert(smollm2_folder, pattern("gated_deltanet"))
    result = distill(conversion, distillation_spec(conversion.student.config, END_TO_END), tmp_path / "run",
                     progress=False)

    trained = set(checkpoint_tensors(tmp_path / "run" / "end_to_end", 1))
    assert trained == {name for name, _ in conversion.student.named_parameters()}  # the whole student, tied ones once
    assert math.isfinite(result.report["heldout"]["end_to_end"]["eval_kl"])
    assert_generates(result.student.eval(), chat_ids(tokenizer), conversion.student.config.vocab_size)
