"""The disk room a distill run checks for before it writes anything: its largest stage's
checkpoint, which holds only what the stage trains (the aligned mixers, the whole student, or
LoRA's adapters) and their optimizer state, not a whole model's."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest

from layerzoo.training.distill.run import distill
from layerzoo.training.runs.space import DiskFull
from tests.training.distill.conftest import make


def free_space(monkeypatch, free: int) -> None:
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=10**12, used=10**12 - free, free=free))


def whole_student_bytes(conversion) -> int:
    """A full fine-tune's checkpoint: every parameter and AdamW's two moments, in fp32."""
    return 3 * 4 * sum(parameter.numel() for parameter in conversion.student.parameters())


ONE_STEP = {"steps": 1, "batch_size": 1, "seq_len": 16}
PARTS = {"align": {"end_to_end": None}, "lora": {"align": None, "end_to_end": {**ONE_STEP, "lora": {"rank": 2}}}}


@pytest.mark.parametrize("stages", PARTS.values(), ids=PARTS.keys())
def test_a_stage_that_trains_part_of_the_student_needs_room_for_that_part_only(text, monkeypatch, tmp_path, stages):
    conversion, spec = make(text, **stages)
    free_space(monkeypatch, whole_student_bytes(conversion) // 2)
    result = distill(conversion, spec, tmp_path / "run", progress=False)
    assert result.report["tokens"]["total"] > 0


def test_a_full_fine_tune_needs_room_for_the_whole_student_and_is_refused_before_anything_is_written(
        text, monkeypatch, tmp_path):
    conversion, spec = make(text, end_to_end=ONE_STEP)
    free_space(monkeypatch, whole_student_bytes(conversion) - 1)
    with pytest.raises(DiskFull, match="the disk is full: a checkpoint of this model needs"):
        distill(conversion, spec, tmp_path / "run", progress=False)
    assert not (tmp_path / "run" / "spec.yaml").exists()
