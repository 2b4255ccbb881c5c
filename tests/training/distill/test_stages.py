"""The two stages on a tiny conversion: stage 1 lowers each converted layer's held-out error and
changes nothing else; stage 2 lowers the held-out KL; a student equal to its teacher has nothing
to learn; the SWA windows of stage 2 follow the window schedule batch by batch."""

from __future__ import annotations

import dataclasses
import json

import torch

from layerzoo.tasks import make_task
from layerzoo.training.objectives.alignment import heldout_alignment, recorded_calls
from layerzoo.training.distill.run import distill
from layerzoo.training.objectives.divergence import heldout_divergence
from layerzoo.training.loop.schedules import WindowSchedule
from tests.helpers.run_checks import metric_records
from tests.training.distill.conftest import SWA_GDN, make


def heldout_task(text, spec):
    data = spec.sections["distill"].data
    task = make_task("text", {**data, "tokenizer": str(text.teacher)}, spec.model.vocab_size)
    return dataclasses.replace(task, split="eval")


def cloned(model) -> dict[str, torch.Tensor]:
    return {name: tensor.clone() for name, tensor in model.state_dict().items()}


def test_alignment_lowers_each_converted_layers_error_and_changes_nothing_else(text, tmp_path):
    conversion, spec = make(text, "gated_deltanet,attention,gated_deltanet", end_to_end=None)
    task = heldout_task(text, spec)
    errors = lambda: heldout_alignment(conversion.teacher, conversion.student, (0, 2), task, 32, 8, seed=5)  # noqa: E731
    before, teacher, student = errors(), cloned(conversion.teacher), cloned(conversion.student)
    distill(conversion, spec, tmp_path / "run", progress=False)
    after = errors()
    assert after["mse_layer0"] < before["mse_layer0"] and after["mse_layer2"] < before["mse_layer2"]
    for name, tensor in conversion.teacher.state_dict().items():
        assert torch.equal(tensor, teacher[name]), name
    changed = {name for name, tensor in conversion.student.state_dict().items() if not torch.equal(tensor, student[name])}
    assert changed and all(name.startswith(("blocks.0.mixer.", "blocks.2.mixer.")) for name in changed)
    records = metric_records(tmp_path / "run" / "align")
    assert [record["tokens"] for record in records if "tokens" in record] == [64 * step for step in range(1, 7)]
    report = json.loads((tmp_path / "run" / "distill-report.json").read_text())
    assert report["tokens"] == {"align": 6 * 64, "total": 6 * 64}


def test_the_recorded_input_is_what_the_teachers_attention_saw(text):
    conversion, _ = make(text)
    ids = torch.randint(0, 64, (2, 12))
    with torch.no_grad(), recorded_calls(conversion.teacher, [1]) as calls:
        conversion.teacher(ids)
        block = conversion.teacher.blocks[1]
        hidden = conversion.teacher.blocks[0](conversion.teacher.embedding(ids))
        assert torch.equal(calls[1].x, block.mixer_norm(hidden))
        assert torch.equal(calls[1].y, block.mixer(block.mixer_norm(hidden)))


def test_end_to_end_lowers_the_heldout_kl(text, tmp_path):
    conversion, spec = make(text, align=None)
    task = heldout_task(text, spec)
    kl = lambda: heldout_divergence(conversion.student, conversion.teacher, task, 32, 8, seed=5)["intact"]["kl"]  # noqa: E731
    before = kl()
    result = distill(conversion, spec, tmp_path / "run", progress=False)
    assert kl() < before
    assert result.student is conversion.student  # a full fine-tune trains the student itself
    records = [record for record in metric_records(tmp_path / "run" / "end_to_end") if "kl" in record]
    assert all(record["loss"] == record["kl"] for record in records)  # ce_weight 0


def test_a_student_equal_to_its_teacher_has_kl_zero_and_no_reliance(text, tmp_path):
    # Layer 1 converted into SWA whose window covers the 32-token windows: the teacher's attention, computed anew
    covering = {"mixers": {"swa": {"type": "swa", "window": 64}}, "layers": ["attention", "swa", "attention"]}
    conversion, spec = make(text, covering, align=None,
                            end_to_end={"steps": 1, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 0.0}})
    assert conversion.converted == (1,)
    result = distill(conversion, spec, tmp_path / "run", progress=False)
    reliance = json.loads((tmp_path / "run" / "reliance.json").read_text())
    assert reliance["intact"]["kl"] == 0.0 and reliance["layers"] == []  # attention and SWA: nothing recurrent to zero
    assert metric_records(tmp_path / "run" / "end_to_end")[0]["kl"] == 0.0
    assert result.report["reliance"] == reliance


def test_stochastic_windows_set_the_swa_layers_window_per_batch(text, tmp_path):
    window = {"schedule": "stochastic", "short": 2, "long": 8, "p_short": 0.5, "anneal_fraction": 0.25}
    conversion, spec = make(text, SWA_GDN, window=window,
                            end_to_end={"steps": 8, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 1e-3}})
    seen = []  # (training?, window) of every forward of the student's SWA layer
    swa = conversion.student.blocks[0].mixer
    swa.register_forward_pre_hook(lambda module, args: seen.append((module.training, module.window)))
    distill(conversion, spec, tmp_path / "run", progress=False)
    config = spec.sections["distill"]
    expected = [WindowSchedule(config.window, 8, config.seed).window(step) for step in range(8)]
    stage_2 = [window for training, window in seen if training][-8:]  # stage 1 trains the mixers alone, at long
    assert stage_2 == expected and set(expected) == {2, 8} and expected[-2:] == [8, 8]
    assert [training_window for training, training_window in seen if training][:-8] == [8] * 6
    assert {window for training, window in seen if not training} == {8}  # held-out measures at the long window
    logged = [record["window"] for record in metric_records(tmp_path / "run" / "end_to_end") if "window" in record]
    assert logged == expected and swa.window == 8
