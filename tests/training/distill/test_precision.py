"""distill.precision: bf16 runs every forward of both stages (the teacher's too) under bf16
autocast; from one seed its losses, KL and held-out measures stay within bf16's reach of fp32's
and differ from them (autocast applied); the report says which precision ran."""

from __future__ import annotations

import math

import pytest
import torch

import layerzoo
from layerzoo.errors import SpecError
from layerzoo.testing.tolerances import TOLERANCES
from layerzoo.training.distill.config import distillation_spec
from layerzoo.training.distill.run import distill
from tests.helpers.conversion import teacher_spec
from tests.helpers.run_checks import metric_records
from tests.training.distill.conftest import SWA_GDN, make

RELATIVE, ABSOLUTE = TOLERANCES[torch.bfloat16]  # bf16's, as kernels are held to it (measured here: under 0.3%)
STAGES = {"align": {"steps": 2, "batch_size": 2, "seq_len": 32}, "end_to_end": {"steps": 2, "batch_size": 2, "seq_len": 32}}
LOGGED = {"align": ("loss", "mse_layer1", "eval_loss"), "end_to_end": ("loss", "kl", "ce", "eval_kl", "eval_ce")}


def run(text, tmp_path, precision: str) -> tuple[dict, dict[str, list[dict]]]:
    """(distill-report, each stage's metrics records) of a two-step-a-stage run at `precision`."""
    conversion, spec = make(text, SWA_GDN, precision=precision, **STAGES)
    result = distill(conversion, spec, tmp_path / precision, progress=False)
    return result.report, {stage: metric_records(tmp_path / precision / stage) for stage in STAGES}


def values(records: list[dict], key: str) -> list[float]:
    return [record[key] for record in records if key in record]


@pytest.fixture(scope="module")
def runs(text, tmp_path_factory):
    folder = tmp_path_factory.mktemp("precision")
    return {precision: run(text, folder, precision) for precision in ("fp32", "bf16")}


def test_bf16_distillation_stays_within_bf16_tolerance_of_fp32(runs):
    (_, fp32), (_, bf16) = runs["fp32"], runs["bf16"]
    for stage, keys in LOGGED.items():
        for key in keys:
            ours, theirs = values(bf16[stage], key), values(fp32[stage], key)
            assert ours and len(ours) == len(theirs), (stage, key)
            for got, want in zip(ours, theirs):
                assert math.isfinite(got) and abs(got - want) <= RELATIVE * abs(want) + ABSOLUTE, (stage, key, got, want)


def test_bf16_is_applied_to_both_stages_and_recorded(runs):
    (fp32_report, fp32), (bf16_report, bf16) = runs["fp32"], runs["bf16"]
    for stage in STAGES:
        assert values(bf16[stage], "loss") != values(fp32[stage], "loss"), f"{stage} ran in fp32"
    assert (fp32_report["precision"], bf16_report["precision"]) == ("fp32", "bf16")
    assert fp32_report["reliance"]["intact"]["kl"] != bf16_report["reliance"]["intact"]["kl"]


def test_auto_is_fp32_on_the_cpu(text, tmp_path):
    conversion, spec = make(text, SWA_GDN, **{**STAGES, "end_to_end": None, "align": {**STAGES["align"], "steps": 1}})
    assert spec.sections["distill"].precision == "auto"
    assert distill(conversion, spec, tmp_path / "run", progress=False, device="cpu").report["precision"] == "fp32"


def test_a_bad_precision_is_one_line_naming_the_key():
    student = layerzoo.load_spec(teacher_spec()).model
    with pytest.raises(SpecError, match=r"distill.precision: expected one of auto, fp32, bf16, got 'fp16'$"):
        distillation_spec(student, {"data": {"files": ["a.txt"]}}, ["distill.precision=fp16"])
