"""A run folder holds one run: training into a used folder needs --resume or --overwrite,
checkpoints come every N steps with the newest K kept, and the spec is written at the start."""

import pytest

from layerzoo import load_spec, shipped_specs
from layerzoo.cli import main
from layerzoo.training.config import TrainingConfig
from layerzoo.training.loop.trainer import TrainingError, train
from tests.helpers.run_checks import checkpoint_steps, metric_records


def test_a_used_run_folder_is_refused_without_resume_or_overwrite(tiny_spec, tmp_path, capsys):
    run = str(tmp_path / "run")
    command = ["train", str(tiny_spec), "--out", run, "--no-progress", "--set", "training.eval.lengths=[32]",
               "--set", "training.checkpoint_every=2"]
    assert main(command + ["--set", "training.steps=4"]) == 0
    capsys.readouterr()
    assert main(command + ["--set", "training.steps=2"]) == 2
    error = capsys.readouterr().err
    assert "already holds a run" in error and "--resume" in error and "--overwrite" in error, error
    assert error.count("\n") == 1, error
    assert main(command + ["--set", "training.steps=2", "--overwrite"]) == 0
    assert checkpoint_steps(run) == [2]  # the older run's step 4 is gone: eval and --resume see this run
    assert [record["step"] for record in metric_records(run) if "loss" in record] == [1, 2]


def test_overwrite_keeps_files_that_are_not_a_runs(tiny_spec, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    with pytest.raises(TrainingError, match="is not empty"):
        train(tiny_spec, ["training.steps=1"], run_dir=run, progress=False)
    train(tiny_spec, ["training.steps=1"], run_dir=run, overwrite=True, progress=False)
    assert (run / "notes.txt").read_text() == "mine" and checkpoint_steps(run) == [1]


@pytest.mark.parametrize("flags", [[], ["--resume"], ["--overwrite"]])
def test_a_file_as_the_run_folder_is_one_line(flags, tiny_spec, tmp_path, capsys):
    (tmp_path / "run").write_text("mine")
    assert main(["train", str(tiny_spec), "--out", str(tmp_path / "run"), *flags]) == 2
    assert capsys.readouterr().err == f"layerzoo: error: {tmp_path / 'run'} is a file, not a folder\n"
    assert (tmp_path / "run").read_text() == "mine"


def test_resume_and_overwrite_exclude_each_other(tiny_spec, capsys):
    with pytest.raises(SystemExit):
        main(["train", str(tiny_spec), "--resume", "--overwrite"])
    assert "not allowed with argument" in capsys.readouterr().err


def test_the_resolved_spec_is_written_when_the_run_starts(tiny_spec, tmp_path):
    run = tmp_path / "run"
    settings = ["training.steps=3", "training.optimizer.lr=1e30"]  # stops at its second step
    with pytest.raises(TrainingError):
        train(tiny_spec, settings, run_dir=run, progress=False)
    assert load_spec(run / "spec.yaml").to_dict() == load_spec(tiny_spec, settings).to_dict()


def test_a_spec_name_cannot_place_the_run_outside_runs(tiny_spec, tmp_path, monkeypatch):
    working = tmp_path / "a" / "b"
    working.mkdir(parents=True)
    monkeypatch.chdir(working)
    spec = load_spec(tiny_spec).to_dict()
    spec["name"] = "../../x"
    with pytest.raises(TrainingError, match=r"spec name '\.\./\.\./x' cannot name a folder under runs/"):
        train(spec, ["training.steps=1"], progress=False)
    assert not (tmp_path / "a" / "x").exists()


def test_checkpoints_come_every_n_steps_and_the_newest_k_are_kept(tiny_spec, tmp_path):
    settings = ["training.steps=7", "training.checkpoint_every=2", "training.keep_checkpoints=2"]
    train(tiny_spec, settings, run_dir=tmp_path / "run", progress=False)
    assert checkpoint_steps(tmp_path / "run") == [6, 7]
    train(tiny_spec, settings[:2] + ["training.keep_checkpoints=null"], run_dir=tmp_path / "all", progress=False)
    assert checkpoint_steps(tmp_path / "all") == [2, 4, 6, 7]


@pytest.mark.parametrize("name", [name for name in shipped_specs() if load_spec(name).training is not None])
def test_every_training_run_checkpoints_by_default(name):
    assert TrainingConfig().checkpoint_every == 500 and TrainingConfig().keep_checkpoints == 2
    assert load_spec(name).training.checkpoint_every is not None
