"""The `distill:` section: read from a file under the student's model, with --set; its bad values
located at file, line and key; a run's spec.yaml reads back whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import layerzoo
from layerzoo.errors import SpecError
from layerzoo.training.distill.config import distillation_spec
from tests.helpers.conversion import teacher_spec

STUDENT = layerzoo.load_spec(teacher_spec()).model


@given(st.integers(1, 10**6), st.integers(1, 64), st.integers(1, 4096), st.floats(0.05, 8.0), st.floats(0.0, 2.0),
       st.one_of(st.none(), st.integers(1, 64)), st.booleans())
def test_a_distill_section_reads_back_to_itself(steps, batch_size, seq_len, temperature, ce_weight, rank, skip_align):
    end_to_end = {"steps": steps, "batch_size": batch_size, "seq_len": seq_len, "temperature": temperature,
                  "ce_weight": ce_weight, "lora": None if rank is None else {"rank": rank}}
    spec = distillation_spec(STUDENT, {"data": {"files": ["corpus/*.txt"]}, "end_to_end": end_to_end,
                                       **({"align": None} if skip_align else {})})
    again = layerzoo.load_spec(spec.to_dict())
    assert again.sections["distill"] == spec.sections["distill"] and again.model == STUDENT
    assert [name for name, _ in again.sections["distill"].stages()] == ["end_to_end"] if skip_align else ["align", "end_to_end"]


def test_bad_values_name_the_file_line_and_key(tmp_path):
    config = tmp_path / "distill.yaml"
    config.write_text("distill:\n  data: {files: [a.txt]}\n  end_to_end:\n    temperature: 0\n")
    with pytest.raises(SpecError, match=rf"^{config}:4: distill.end_to_end.temperature: must be > 0.0, got 0"):
        distillation_spec(STUDENT, config)
    config.write_text("model: {d_model: 8}\ndistill: {data: {files: [a.txt]}}\n")
    with pytest.raises(SpecError, match=rf"^{config}:1: model: a distillation config sets distill, name, description only"):
        distillation_spec(STUDENT, config)
    with pytest.raises(SpecError, match=r"distill.data.tokenizer: not set here: the text is read with the teacher's"):
        distillation_spec(STUDENT, {"data": {"files": ["a.txt"], "tokenizer": "bytes"}})
    with pytest.raises(SpecError, match=r"distill: both stages are null: nothing to distil"):
        distillation_spec(STUDENT, {"data": {"files": ["a.txt"]}}, ["distill.align=null", "distill.end_to_end=null"])
    with pytest.raises(SpecError, match=r"--set distill.align.stepz=3: distill.align.stepz: unknown key; did you mean 'steps'"):
        distillation_spec(STUDENT, {"data": {"files": ["a.txt"]}}, ["distill.align.stepz=3"])


def test_a_stochastic_window_needs_one_window_for_every_swa_layer():
    model = teacher_spec()["model"]
    model["mixers"]["swa"] = {"n_heads": 2, "window": 8}
    model.update(pattern=None, layers=["swa", "swa", "attention"], overrides={0: {"window": 4}})
    student = layerzoo.load_spec({"model": model}).model
    with pytest.raises(SpecError, match=r"distill.window: sets one window for every SWA layer.*\[4, 8\]"):
        distillation_spec(student, {"data": {"files": ["a.txt"]}, "window": {"schedule": "fixed", "long": 8}})


def test_a_window_for_a_student_without_swa_layers_is_refused():
    with pytest.raises(SpecError, match=r"distill.window: sets the SWA layers' window, but this model has no SWA layer"):
        distillation_spec(STUDENT, {"data": {"files": ["a.txt"]}, "window": {"schedule": "stochastic", "short": 4,
                                                                           "long": 8}})


def test_a_sequence_shorter_than_the_context_is_refused_in_one_line():
    with pytest.raises(SpecError, match=r"distill\.end_to_end\.seq_len: 2 tokens cannot be split over context 3") as error:
        distillation_spec(STUDENT, {"data": {"files": ["x.txt"]}}, ["distill.context=3", "distill.end_to_end.seq_len=2"])
    assert "\n" not in str(error.value)
    spec = distillation_spec(STUDENT, {"data": {"files": ["x.txt"]}}, ["distill.context=2", "distill.align.seq_len=2"])
    assert spec.sections["distill"].context == 2  # a token a rank is enough
