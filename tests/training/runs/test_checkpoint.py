import os
import shutil

import pytest
import torch

import layerzoo
from layerzoo.training.runs.checkpoint import (
    CheckpointError, checkpoint_spec, load_training_state, load_weights, save_checkpoint,
)
from layerzoo.training.runs.run_checkpoints import latest_checkpoint
from layerzoo.training.loop.loop import adamw
from layerzoo.training.loop.trainer import train
from tests.helpers.run_checks import assert_same_final_state


def trained(spec_path, tmp_path):
    spec = layerzoo.load_spec(spec_path)
    torch.manual_seed(0)
    model = layerzoo.build(spec)
    optimizer = adamw(model, spec.training.optimizer)
    for _ in range(2):
        model(torch.randint(0, 64, (2, 16))).float().pow(2).mean().backward()
        optimizer.step()
        optimizer.zero_grad()
    return spec, model, optimizer


def test_round_trip_is_bit_exact(tiny_spec, tmp_path):
    spec, model, optimizer = trained(tiny_spec, tmp_path)
    torch.manual_seed(123)
    save_checkpoint(tmp_path / "ckpt", model, optimizer, spec, step=2)
    rng_after_save = torch.rand(3)
    torch.manual_seed(999)
    fresh = layerzoo.build(spec)
    fresh_optimizer = adamw(fresh, spec.training.optimizer)
    load_weights(tmp_path / "ckpt", fresh, spec)
    meta = load_training_state(tmp_path / "ckpt", fresh, fresh_optimizer)
    assert meta["step"] == 2
    assert torch.equal(torch.rand(3), rng_after_save)
    for (name, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert torch.equal(a, b), name
    assert fresh.head.weight is fresh.embedding.weight  # ties survive loading
    before, after = optimizer.state_dict(), fresh_optimizer.state_dict()
    assert before["param_groups"] == after["param_groups"]
    for index, state in before["state"].items():
        for key, value in state.items():
            assert torch.equal(value, after["state"][index][key]), (index, key)


def test_a_resumed_run_continues_the_same_run_and_metrics_hold_each_step_once(tiny_spec, tmp_path):
    settings = ["training.steps=6", "training.checkpoint_every=3", "training.eval.every=2"]
    whole = train(tiny_spec, settings, run_dir=tmp_path / "whole", progress=False).run_dir
    interrupted = tmp_path / "interrupted"
    shutil.copytree(whole, interrupted)  # as if killed after step 6's metrics, while writing its checkpoint
    os.replace(interrupted / "checkpoints" / "step-00000006", interrupted / "checkpoints" / "step-00000006.partial")
    (interrupted / "checkpoints" / "step-00000005.partial").mkdir()  # and an earlier write cut short
    assert latest_checkpoint(interrupted).name == "step-00000003"
    train(tiny_spec, settings, run_dir=interrupted, resume=True, progress=False)
    assert_same_final_state(interrupted, whole)  # steps 4..6 recomputed, equal to the bit, logged once
    assert sorted(path.name for path in (interrupted / "checkpoints").iterdir()) == ["step-00000003", "step-00000006"]


def test_resume_refuses_a_changed_training_section_but_its_safe_keys(tiny_spec, tmp_path):
    settings = ["training.steps=4", "training.checkpoint_every=2"]
    run_dir = train(tiny_spec, settings, run_dir=tmp_path / "run", progress=False).run_dir
    shutil.rmtree(run_dir / "checkpoints" / "step-00000004")
    with pytest.raises(CheckpointError, match=r"training\.optimizer\.lr is 0\.003 in the checkpoint, 0\.01 in the spec; "
                                              r"a resumed run may change only .*log_every"):
        train(tiny_spec, settings + ["training.optimizer.lr=1e-2"], run_dir=run_dir, resume=True, progress=False)
    safe = ["training.log_every=2", "training.eval.samples=4", "training.keep_checkpoints=3", "training.grad_accum=2"]
    train(tiny_spec, settings + safe, run_dir=run_dir, resume=True, progress=False)
    assert latest_checkpoint(run_dir).name == "step-00000004"


def test_a_checkpoint_refuses_another_spec(tiny_spec, tmp_path):
    spec, model, optimizer = trained(tiny_spec, tmp_path)
    save_checkpoint(tmp_path / "ckpt", model, optimizer, spec, step=2)
    other = layerzoo.load_spec(tiny_spec, ["model.d_model=48"])
    with pytest.raises(CheckpointError, match=r"model\.d_model is 32 in the checkpoint, 48 in the spec"):
        load_weights(tmp_path / "ckpt", layerzoo.build(other), other)
    with pytest.raises(CheckpointError, match="not a layerzoo checkpoint"):
        checkpoint_spec(tmp_path)


def test_resume_without_a_checkpoint_is_an_error(tiny_spec, tmp_path):
    from layerzoo.training.loop.trainer import TrainingError

    with pytest.raises(TrainingError, match="no checkpoint to resume from"):
        train(tiny_spec, run_dir=tmp_path / "empty", resume=True, progress=False)
