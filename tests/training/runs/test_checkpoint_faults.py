"""A truncated, corrupt or mismatched checkpoint is one line, and the previous good one is used."""

import json
import logging
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

import layerzoo
from layerzoo.cli import main
from layerzoo.training.runs.checkpoint import CheckpointError, load_training_state, load_weights
from layerzoo.training.loop.loop import adamw
from layerzoo.training.loop.trainer import train
from tests.helpers.run_checks import assert_same_final_state, checkpoint_steps

TWO_CHECKPOINTS = ["training.steps=4", "training.checkpoint_every=2"]


def cut_short(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def rewrite_trainer_json(checkpoint, **changes):
    meta = json.loads((checkpoint / "trainer.json").read_text())
    (checkpoint / "trainer.json").write_text(json.dumps({**meta, **changes}))


def resize_a_weight(checkpoint):
    weights = load_file(checkpoint / "model.safetensors")
    name = next(name for name, tensor in weights.items() if tensor.dim() == 2)
    weights[name] = torch.zeros(weights[name].shape[0] + 1, weights[name].shape[1])
    save_file(weights, checkpoint / "model.safetensors")


def poison_a_weight(checkpoint):
    weights = load_file(checkpoint / "model.safetensors")
    name = next(iter(weights))
    weights[name][0] = float("nan")
    save_file(weights, checkpoint / "model.safetensors")


FAULTS = {  # name: (damage to a checkpoint folder, words of the one-line error)
    "weights cut short": (lambda c: cut_short(c / "model.safetensors"), "model.safetensors: truncated or corrupt"),
    "optimizer cut short": (lambda c: cut_short(c / "trainer.safetensors"), "trainer.safetensors: truncated or corrupt"),
    "trainer.json not JSON": (lambda c: (c / "trainer.json").write_text('{"step": 4,'), "trainer.json: not valid JSON"),
    "negative step": (lambda c: rewrite_trainer_json(c, step=-5), "trainer.json: step must be a whole number >= 1, got -5"),
    "weights of another size": (resize_a_weight, "does not fit the model"),
    "non-finite weights": (poison_a_weight, "model.safetensors: holds non-finite values"),
    "no spec": (lambda c: (c / "spec.yaml").unlink(), "not a layerzoo checkpoint (no spec.yaml)"),
}


@pytest.fixture
def run(tiny_spec, tmp_path):
    """A run folder with checkpoints at steps 2 and 4."""
    return train(tiny_spec, TWO_CHECKPOINTS, run_dir=tmp_path / "run", progress=False).run_dir


def newest(run_dir):
    return run_dir / "checkpoints" / "step-00000004"


@pytest.mark.parametrize("fault", FAULTS)
def test_a_damaged_checkpoint_is_a_one_line_error(fault, run, tiny_spec):
    damage, words = FAULTS[fault]
    damage(newest(run))
    spec = layerzoo.load_spec(tiny_spec)
    model = layerzoo.build(spec)
    with pytest.raises(CheckpointError) as raised:
        load_weights(newest(run), model, spec)
        load_training_state(newest(run), model, adamw(model, spec.training.optimizer))
    message = str(raised.value)
    assert words in message and str(newest(run)) in message and "\n" not in message, message


def test_eval_of_a_damaged_checkpoint_is_one_line(run, capsys):
    cut_short(newest(run) / "model.safetensors")
    assert main(["eval", str(newest(run))]) == 2
    error = capsys.readouterr().err
    assert "truncated or corrupt" in error and error.count("\n") == 1, error


def test_resume_falls_back_to_the_previous_good_checkpoint(run, tiny_spec, tmp_path, caplog):
    damaged = tmp_path / "damaged"
    shutil.copytree(run, damaged)
    cut_short(newest(damaged) / "model.safetensors")
    with caplog.at_level(logging.WARNING, logger="layerzoo"):
        train(tiny_spec, TWO_CHECKPOINTS, run_dir=damaged, resume=True, progress=False)
    assert "step-00000004/model.safetensors: truncated or corrupt" in caplog.text
    assert "trying step-00000002" in caplog.text
    assert checkpoint_steps(damaged) == [2, 4]
    assert_same_final_state(damaged, run)  # steps 3 and 4 trained again, as the first time


def test_eval_falls_back_to_the_previous_good_checkpoint(run, caplog, capsys):
    rewrite_trainer_json(newest(run), step=-5)
    with caplog.at_level(logging.WARNING, logger="layerzoo"):
        assert main(["eval", str(run), "--lengths", "32", "--samples", "2"]) == 0
    assert "step must be a whole number" in caplog.text and "trying step-00000002" in caplog.text


def test_no_usable_checkpoint_is_one_line(run, capsys):
    for checkpoint in (run / "checkpoints").iterdir():
        cut_short(checkpoint / "model.safetensors")
    assert main(["eval", str(run)]) == 2
    error = capsys.readouterr().err
    assert "no usable checkpoint" in error and error.count("\n") == 1, error
