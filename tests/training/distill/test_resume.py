"""A distillation resumed mid-stage 1, between the stages, or mid-stage 2 (LoRA with dropout,
stochastic windows), or after a SIGINT, ends as the uninterrupted run does, to the bit, from
checkpoints that hold only what their stage trains; and a run folder that holds a run is refused
without --resume or --overwrite."""

from __future__ import annotations

import shutil
import signal

import pytest

from layerzoo.training.distill.run import distill
from layerzoo.training.errors import TrainingError
from layerzoo.training.loop.interrupt import TrainingInterrupted
from layerzoo.training.runs.checkpoint import CheckpointError, load_weights, read_checkpoint
from tests.helpers.run_checks import assert_same_final_state
from tests.training.distill.conftest import SWA_GDN, make

STAGE = {"steps": 4, "batch_size": 2, "seq_len": 32, "optimizer": {"lr": 3e-3, "warmup_steps": 1}}
SETTINGS = dict(align=STAGE, end_to_end={**STAGE, "ce_weight": 0.5, "lora": {"rank": 2, "dropout": 0.1}},
                window={"schedule": "stochastic", "short": 2, "long": 8}, checkpoint_every=2, keep_checkpoints=None,
                eval={"samples": 4, "batch_size": 4, "every": 2})


def run(text, folder, **options):
    conversion, spec = make(text, SWA_GDN, **SETTINGS)
    return distill(conversion, spec, folder, progress=False, **options)


@pytest.fixture(scope="module")
def whole(text, tmp_path_factory):
    return run(text, tmp_path_factory.mktemp("whole") / "run").run_dir


@pytest.mark.parametrize("cut", [["align/checkpoints/step-00000004", "end_to_end"], ["end_to_end"],
                                 ["end_to_end/checkpoints/step-00000004"]],
                         ids=["mid-stage-1", "between-stages", "mid-stage-2"])
def test_a_resumed_distillation_equals_the_uninterrupted_one(text, whole, tmp_path, cut):
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    for path in cut:  # as if killed before these were written
        shutil.rmtree(folder / path)
    run(text, folder, resume=True)
    for stage in ("align", "end_to_end"):
        assert_same_final_state(folder / stage, whole / stage)
    assert (folder / "reliance.json").read_text() == (whole / "reliance.json").read_text()


def test_a_run_folder_that_holds_a_run_needs_resume_or_overwrite(text, whole, tmp_path):
    folder = tmp_path / "run"
    shutil.copytree(whole, folder)
    with pytest.raises(TrainingError, match=r"already holds a run .*--resume.*--overwrite"):
        run(text, folder)
    run(text, folder, overwrite=True)
    assert_same_final_state(folder / "end_to_end", whole / "end_to_end")
    with pytest.raises(TrainingError, match="no checkpoint to resume from"):
        run(text, tmp_path / "empty", resume=True)


def test_sigint_in_stage_2_saves_a_checkpoint_and_resume_ends_as_the_whole_run(text, whole, tmp_path):
    conversion, spec = make(text, SWA_GDN, **SETTINGS)
    calls = []

    def interrupt(module, args):
        calls.append(module.training)
        if calls.count(True) == 4 + 3:  # stage 1's four training steps, then stage 2's third
            signal.raise_signal(signal.SIGINT)

    handle = conversion.student.blocks[1].mixer.register_forward_pre_hook(interrupt)
    with pytest.raises(TrainingInterrupted, match=r"interrupted by SIGINT after step 3 of end_to_end; saved .*"
                                                  r"step-00000003; continue with --resume") as stopped:
        distill(conversion, spec, tmp_path / "run", progress=False)
    handle.remove()
    assert stopped.value.exit_code == 130
    run(text, tmp_path / "run", resume=True)
    for stage in ("align", "end_to_end"):
        assert_same_final_state(tmp_path / "run" / stage, whole / stage)


def test_a_checkpoint_holds_what_its_stage_trains_and_is_no_whole_model(text, whole):
    conversion, _ = make(text, SWA_GDN, **SETTINGS)
    align = read_checkpoint(whole / "align" / "checkpoints" / "step-00000004")
    assert align.weights and all(name.startswith(("blocks.0.mixer.", "blocks.1.mixer.")) for name in align.weights)
    adapters = read_checkpoint(whole / "end_to_end" / "checkpoints" / "step-00000004").weights
    assert adapters and all("lora_" in name for name in adapters)
    with pytest.raises(CheckpointError, match=r"step-00000004: holds only the parameters its stage trained, not a "
                                              r"whole model"):
        load_weights(align, conversion.student)
