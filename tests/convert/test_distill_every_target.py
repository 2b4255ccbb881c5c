"""Every target mixer, converted from a Llama and from a Qwen3 teacher, distils in each stage: a
step of alignment moves the new mixer's tensors and nothing else, a step end to end gives a finite
KL, and the reliance measure has a row for each recurrent layer."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

pytest.importorskip("transformers")

from layerzoo.convert import convert
from layerzoo.training.distill.config import distillation_spec
from layerzoo.training.distill.run import distill
from tests.helpers.conversion import write_text, write_tokenizer
from tests.helpers.hf_teachers import TeacherCase, save_teacher
from tests.training.distill.conftest import settings

# Qwen3's heads 32 wide (128 = 2 d_model): Mamba-2's inner width is a multiple of d_model
TEACHERS = {"llama": TeacherCase("llama", n_layers=2, n_heads=4, n_kv_heads=2),
            "qwen3": TeacherCase("qwen3", n_layers=2, n_heads=4, n_kv_heads=1, head_dim=32)}
TARGETS = ("swa", "gated_deltanet", "mlstm", "mamba2", "kda")
ONE_STEP = {"steps": 1, "batch_size": 2, "seq_len": 32}


@pytest.fixture(scope="module", params=sorted(TEACHERS))
def teacher(request, tmp_path_factory) -> SimpleNamespace:
    folder = tmp_path_factory.mktemp(request.param)
    corpus = write_text(folder / "corpus")
    return SimpleNamespace(corpus=corpus, folder=write_tokenizer(corpus, save_teacher(
        TEACHERS[request.param], folder / "teacher", tokenizer_size=None)))


@pytest.mark.parametrize("stage", ["align", "end_to_end"])
@pytest.mark.parametrize("kind", TARGETS)
def test_every_target_converts_and_distils(teacher, kind, stage, tmp_path):
    pattern = {"mixers": {kind: {"window": 8}} if kind == "swa" else {}, "pattern": [kind, "attention"]}
    conversion = convert(teacher.folder, pattern)
    converted = {name: tensor.clone() for name, tensor in conversion.student.state_dict().items()}
    stages = {"align": None, "end_to_end": None, stage: ONE_STEP}
    spec = distillation_spec(conversion.student.config, settings(teacher, **stages))
    result = distill(conversion, spec, tmp_path / "run", progress=False)

    after = result.student.state_dict()
    assert all(torch.isfinite(tensor).all() for tensor in after.values())
    moved = {name for name in converted if not torch.equal(after[name], converted[name])}
    if stage == "align":  # only the new mixer trains
        assert moved and all(name.startswith("blocks.0.mixer.") for name in moved), (kind, sorted(moved))
    assert math.isfinite(result.report["heldout"][stage]["eval_loss"])
    rows = [(row["layer"], row["mixer"]) for row in result.report["reliance"]["layers"]]
    assert rows == ([] if kind == "swa" else [(0, kind)])
    assert all(math.isfinite(row["kl"]) for row in result.report["reliance"]["layers"])
    assert result.report["tokens"]["total"] == 2 * 32
