"""`layerzoo sweep`: grid points x seeds as ordinary run folders, J processes at a time; finished
runs skipped, interrupted ones resumed, failed ones reported while the others go on."""

import json
import shutil

import pytest
import torch
import yaml

from layerzoo.cli import main
from layerzoo.training.sweeps.plan import folder_safe, parse_grid, plan, split_values

HUNDRED = ",".join(str(value) for value in range(1, 101))
NAMES = ["window.long=8__seed=3", "window.long=8__seed=4", "window.long=16__seed=3", "window.long=16__seed=4"]


def test_every_point_and_seed_is_an_ordinary_run_folder(tiny_sweep):
    assert [outcome.status for outcome in tiny_sweep.outcomes] == ["done"] * 4
    manifest = json.loads((tiny_sweep.out / "sweep.json").read_text())
    assert manifest["spec"] == str(tiny_sweep.spec.resolve()) and "training.steps=3" in manifest["overrides"]
    assert [run["name"] for run in manifest["runs"]] == NAMES
    assert manifest["runs"][2] == {"name": NAMES[2], "group": "window.long=16", "point": {"training.window.long": "16"},
                                   "seed": 3}
    threads = max(1, torch.get_num_threads() // 2)
    for run in manifest["runs"]:
        folder = tiny_sweep.out / run["name"]
        spec = yaml.safe_load((folder / "spec.yaml").read_text())
        assert spec["training"]["seed"] == run["seed"] and spec["training"]["steps"] == 3
        window = spec["training"]["window"]["long"]
        assert str(window) == run["point"]["training.window.long"] and (folder / f"eval-window{window}.json").is_file()
        log = (folder / "train.log").read_text()
        assert log.startswith(f"$ OMP_NUM_THREADS={threads} ") and "--overwrite" in log and "niah accuracy" in log
    assert "| window.long=8 | 2 | 8 |" in tiny_sweep.output and "| window.long=16 | 2 | 16 |" in tiny_sweep.output
    for suffix in ("md", "json", "png"):
        assert (tiny_sweep.out / f"compare-niah.{suffix}").is_file()


def test_rerun_skips_finished_runs_resumes_interrupted_ones_and_reports_failures(tiny_sweep, tmp_path, capsys):
    out = tmp_path / "sweep"
    shutil.copytree(tiny_sweep.out, out)
    argv = ["sweep", *tiny_sweep.argv, "--out", str(out), "--jobs", "2"]
    assert main(argv) == 0
    assert capsys.readouterr().out.count("finished before, skipped") == 4
    # Cut one run back to its step-2 checkpoint, as a kill after that checkpoint leaves it ...
    interrupted = out / NAMES[0]
    shutil.rmtree(interrupted / "checkpoints" / "step-00000003")
    (interrupted / "eval-window8.json").unlink()
    # ... and make another unable to resume: every checkpoint's weights unreadable.
    broken = out / NAMES[3]
    for weights in (broken / "checkpoints").glob("step-*/model.safetensors"):
        weights.write_bytes(b"not safetensors")
    (broken / "eval-window16.json").unlink()
    assert main(argv) == 1
    output = capsys.readouterr().out
    assert output.count("finished before, skipped") == 2 and f"{NAMES[0]}: done" in output
    assert f"{NAMES[3]}: FAILED" in output and "(exit 2: layerzoo: error:" in output
    assert f"1 of 4 runs failed ({NAMES[3]})" in output
    assert "| window.long=16 | 1 | 16 |" in output and f"skipped {broken}" in output  # the table goes on without it
    steps = [record["step"] for record in map(json.loads, (interrupted / "metrics.jsonl").read_text().splitlines())
             if "loss" in record]
    assert steps == [1, 2, 3] and (interrupted / "eval-window8.json").is_file()
    assert (interrupted / "train.log").read_text().count("--resume") == 1


@pytest.mark.parametrize("flags, words", [
    (["--grid", "training.window.long"], "expected KEY=V1,V2,..."),
    (["--grid", "training.window.long=8,,16"], "no empty value"),
    (["--grid", "training.seed=1,2"], "sweep seeds with --seeds N"),
    (["--grid", "training.window.long=8,8"], "a value is listed twice"),
    (["--grid", "training.steps=1", "--grid", "training.steps=2"], "already swept by another --grid"),
    (["--grid", "training.window.lng=8,16"], "did you mean 'long'"),
    (["--grid", "training.eval.lengths=[48, 96],[48,96]"], None),  # two values, one folder name: refused
    (["--seeds", "0"], "--seeds must be >= 1"),
    (["--jobs", "0"], "--jobs must be >= 1"),
    (["--max-runs", "0"], "--max-runs must be >= 1"),
    ([arg for key in ("model.d_model", "training.seq_len", "training.steps") for arg in ("--grid", f"{key}={HUNDRED}")],
     "the grid is 100 x 100 x 100 values x 1 seed: 1,000,000 runs, over the bound of 10,000"),
    (["--seeds", "10001"], "the grid is 10,001 seeds: 10,001 runs, over the bound of 10,000; sweep fewer values, or "
                           "raise the bound with --max-runs"),
    (["--grid", "training.window.long=8,16", "--seeds", "2", "--max-runs", "3"], "4 runs, over the bound of 3"),
    (["--grid", f"training.window.long={'8,' * 2000}8"], "a value is listed twice"),
    (["--grid", f"training.optimizer.lr=0.001{'0' * 4000}"], "run folder name optimizer.lr=0.001000"),
])
def test_bad_sweeps_are_one_line_before_any_run(flags, words, tiny_spec, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny_spec), *flags, "--out", str(out)]) == 2
    error = capsys.readouterr().err
    assert (words or "share the run folder name") in error and error.count("\n") == 1, error
    assert len(error) < 400, error  # a long flag is quoted in part
    assert not out.exists()


def test_a_sweep_says_its_plan_before_it_checks_the_runs(tiny_spec, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny_spec), "--grid", "training.window.long=8,eight", "--out", str(out)]) == 2
    output, error = capsys.readouterr()
    assert output.startswith(f"sweep of {tiny_spec}: 2 runs (2 values x 1 seed) in {out}, 1 at a time"), output
    assert "training.window.long=eight" in error and error.count("\n") == 1, error
    assert not out.exists()


def test_a_folder_holding_another_sweep_is_refused(tiny_sweep, capsys):
    assert main(["sweep", *tiny_sweep.argv, "--set", "training.steps=4", "--out", str(tiny_sweep.out)]) == 2
    error = capsys.readouterr().err
    assert f"{tiny_sweep.out} holds a sweep of" in error and error.count("\n") == 1


def test_grid_values_split_at_top_level_commas_and_name_folders():
    assert split_values("[64, 128],[64, 256], null") == ["[64, 128]", "[64, 256]", "null"]
    assert split_values("{a: 1, b: 2},'x,y'") == ["{a: 1, b: 2}", "'x,y'"]
    assert folder_safe("[64, 128]") == "64-128" and folder_safe("1e-3") == "1e-3"
    runs = plan(parse_grid(["model.d_model=32,64", "training.window.long=null"]), [0, 1])
    assert [run.name for run in runs] == ["model.d_model=32__window.long=null__seed=0", "model.d_model=32__window.long=null__seed=1",
                                          "model.d_model=64__window.long=null__seed=0", "model.d_model=64__window.long=null__seed=1"]
    assert runs[1].overrides == ["model.d_model=32", "training.window.long=null", "training.seed=1"]
    assert [run.name for run in plan([], [5])] == ["seed=5"]
