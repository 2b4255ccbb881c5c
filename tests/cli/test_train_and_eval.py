import json

import pytest

from layerzoo.cli import main
from layerzoo.errors import OptionError


def test_train_then_eval_write_tables_json_and_heatmaps(tiny_spec, tmp_path, capsys):
    run_dir = tmp_path / "run"
    niah = ["--set", "training.task={name: niah, key_len: 1, value_len: 1}", "--set", "model.vocab_size=64",
            "--set", "training.seq_len=48", "--set", "training.eval.lengths=[48, 96]",
            "--set", "training.eval.depths=[0, 1]", "--set", "training.steps=3"]
    assert main(["train", str(tiny_spec), *niah, "--out", str(run_dir), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "niah accuracy (%)" in out and "depth \\ length" in out
    grid = json.loads((run_dir / "eval-window16.json").read_text())
    assert grid["lengths"] == [48, 96] and grid["depths"] == [0.0, 1.0]
    assert set(grid["variants"]) == {"single_noise", "single_random", "multikey", "multivalue", "multiquery"}
    assert (run_dir / "eval-window16.png").read_bytes()[:4] == b"\x89PNG"
    assert main(["eval", str(run_dir), "--lengths", "64", "--depths", "0.5", "--window", "4", "--samples", "5"]) == 0
    grid = json.loads((run_dir / "eval-window4.json").read_text())
    assert grid["window"] == 4 and grid["lengths"] == [64] and len(grid["accuracy"]) == 1
    # the same from Python: layerzoo.evaluation.evaluate takes the flags as keyword arguments
    from layerzoo.evaluation import evaluate

    (result,) = evaluate([run_dir], lengths=[64], depths=[0.5], window=4, samples=5).values()
    assert json.loads(json.dumps(result)) == {key: grid[key] for key in result}
    with pytest.raises(OptionError, match=r"^lenghts: unknown key; did you mean 'lengths'\?"):
        evaluate([run_dir], lenghts=[64])


@pytest.mark.parametrize("argv, words", [
    (["train", "swa-tiny"], "has no training: section"),
    (["eval", "/nonexistent/run"], "no checkpoint there"),
    (["train", "{spec}", "--set", "training.window.p_short=2"], "training.window.p_short: must be between"),
])
def test_bad_input_is_one_line(argv, words, tiny_spec, capsys):
    argv = [arg.replace("{spec}", str(tiny_spec)) for arg in argv]
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert words in error and error.count("\n") == 1, error


def test_eval_rejects_bad_flags_in_one_line(tiny_spec, tmp_path, capsys):
    run_dir = tmp_path / "run"
    assert main(["train", str(tiny_spec), "--set", "training.steps=1", "--out", str(run_dir), "--no-progress"]) == 0
    for flags, words in ((["--depths", "1.5"], "--depths: must be between 0.0 and 1.0, got 1.5"),
                         (["--window", "0"], "--window: must be >= 1, got 0"), (["--samples", "0"], "--samples: must be >= 1"),
                         (["--lengths", "64", "-2"], "--lengths: must be >= 1, got -2"),
                         (["--chunk-size", "0"], "--chunk-size: must be >= 1"), (["--holdout", "0.6"], "--holdout: must be")):
        capsys.readouterr()
        assert main(["eval", str(run_dir), *flags]) == 2, flags
        error = capsys.readouterr().err
        assert words in error and error.count("\n") == 1, error


def test_the_main_job_spec_trains_and_reports(tmp_path, capsys):
    """`layerzoo train swax-tiny` (the README's main job), cut to a few steps and a small grid."""
    short = ["--set", "training.steps=4", "--set", "training.eval.lengths=[64, 128]", "--set", "training.eval.samples=2"]
    assert main(["train", "swax-tiny", *short, "--out", str(tmp_path), "--no-progress"]) == 0
    assert "trained at length 64" in capsys.readouterr().out
    grid = json.loads((tmp_path / "eval-window32.json").read_text())
    assert grid["lengths"] == [64, 128] and set(grid["variants"]) == {"single_random", "single_noise"}
    assert (tmp_path / "eval-window32.png").exists()
