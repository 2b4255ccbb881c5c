"""LoRA through peft in stage 2: adapters on the chosen projections only, merged into a plain
CausalLM that computes what the adapted model did; and peft missing is one line before anything runs."""

from __future__ import annotations

import sys

import pytest
import torch

import layerzoo
from layerzoo.testing import assert_close
from layerzoo.training.distill.config import LoraConfig
from layerzoo.training.distill.lora import lora_targets, merged, with_lora
from layerzoo.training.distill.run import distill
from layerzoo.training.errors import TrainingError
from tests.helpers.run_checks import metric_records
from tests.training.distill.conftest import make

peft = pytest.importorskip("peft")


def test_lora_merges_into_a_plain_model_with_the_adapted_logits(text):
    conversion, _ = make(text)
    student = conversion.student
    assert lora_targets(student, ["ffn"]) == [f"blocks.{i}.ffn.{name}" for i in range(3) for name in ("gate_up", "down")]
    wrapped = with_lora(student, LoraConfig(rank=2, modules=("mixer",)))
    trainable = [name for name, parameter in wrapped.named_parameters() if parameter.requires_grad]
    assert trainable and all("lora_" in name and ".mixer." in name for name in trainable)
    with torch.no_grad():
        for name, parameter in wrapped.named_parameters():
            if "lora_B" in name:  # B starts at zero; make the adapters change something
                parameter.normal_(std=0.5)
        ids = torch.randint(0, 64, (2, 16))
        adapted = wrapped(ids)
        plain = merged(wrapped)
        assert type(plain) is layerzoo.CausalLM and plain is student
        assert not any("lora" in name or "base_layer" in name for name in plain.state_dict())
        assert_close(plain(ids), adapted, torch.float32)
        assert not torch.allclose(plain(ids), conversion.teacher(ids))
    assert all(parameter.requires_grad for parameter in plain.parameters())


def test_a_lora_stage_trains_adapters_only_and_saves_a_merged_student(text, tmp_path):
    conversion, spec = make(text, align=None, end_to_end={"steps": 3, "batch_size": 2, "seq_len": 32,
                                                          "optimizer": {"lr": 1e-2}, "lora": {"rank": 2}})
    frozen = {name: tensor.clone() for name, tensor in conversion.student.state_dict().items()}
    result = distill(conversion, spec, tmp_path / "run", progress=False)
    assert type(result.student) is layerzoo.CausalLM
    changed = [name for name, tensor in result.student.state_dict().items() if not torch.equal(tensor, frozen[name])]
    assert changed and all(name.endswith(".weight") and ".embedding" not in name for name in changed)
    assert len(metric_records(tmp_path / "run" / "end_to_end")) >= 3


def test_lora_without_peft_is_one_line_before_the_run_starts(text, tmp_path, monkeypatch):
    conversion, spec = make(text, end_to_end={"lora": {"rank": 2}})
    monkeypatch.setitem(sys.modules, "peft", None)  # an import of peft now fails
    with pytest.raises(TrainingError, match=r"^distill.end_to_end.lora needs peft: pip install peft") as error:
        distill(conversion, spec, tmp_path / "run", progress=False)
    assert "\n" not in str(error.value) and not (tmp_path / "run").exists()
