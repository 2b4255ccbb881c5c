"""`layerzoo compare`: runs and sweeps side by side (Markdown, JSON, PNG), the seeds of a sweep's grid
point grouped; every number checked against what the runs themselves wrote."""

import json
import shutil

import pytest
import yaml

import layerzoo
from layerzoo.cli import main


def test_a_sweep_is_grouped_by_grid_point_with_mean_min_and_max_over_seeds(tiny_sweep, tmp_path, capsys):
    prefix = tmp_path / "cmp"
    assert main(["compare", str(tiny_sweep.out), "--out", str(prefix)]) == 0
    printed = capsys.readouterr().out
    markdown = (tmp_path / "cmp.md").read_text()
    assert printed.startswith(markdown) and (tmp_path / "cmp.png").read_bytes()[:4] == b"\x89PNG"
    comparison = json.loads((tmp_path / "cmp.json").read_text())
    assert comparison["metric"] == "niah" and comparison["skipped"] == []
    assert [group["label"] for group in comparison["groups"]] == ["window.long=8", "window.long=16"]
    for group, window in zip(comparison["groups"], (8, 16)):
        folders = [tiny_sweep.out / f"{group['label']}__seed={seed}" for seed in (3, 4)]
        assert [run["folder"] for run in group["runs"]] == list(map(str, folders))
        # each run's accuracy at a length: the mean over depths of its own report's grid
        reports = [json.loads((folder / f"eval-window{window}.json").read_text()) for folder in folders]
        per_run = [[sum(column) / len(column) for column in zip(*report["accuracy"])] for report in reports]
        curve = group["curve"]
        assert curve["x"] == [48, 96] and curve["runs"] == [2, 2]
        for i, values in enumerate(zip(*per_run)):
            assert curve["mean"][i] == pytest.approx(sum(values) / 2)
            assert (curve["min"][i], curve["max"][i]) == (min(values), max(values))
        losses = [last(folder, "loss") for folder in folders]
        speeds = [last(folder, "tokens_per_s") for folder in folders]
        assert group["final_loss"] == {"mean": pytest.approx(sum(losses) / 2), "min": min(losses), "max": max(losses), "runs": 2}
        assert (group["tokens_per_s"]["min"], group["tokens_per_s"]["max"]) == (min(speeds), max(speeds))
        model = layerzoo.build(folders[0] / "spec.yaml", device="meta")
        layerzoo.set_window(model, window)
        assert group["state"] == {"length": 96, "elements": model.state_size(96), "bytes": 4 * model.state_size(96)}
        mean, low, high = (100 * curve[key][0] for key in ("mean", "min", "max"))
        assert f"| {group['label']} | 2 | {window} | {mean:.1f} [{low:.1f}, {high:.1f}] |" in markdown
    assert comparison["groups"][0]["state"]["elements"] < comparison["groups"][1]["state"]["elements"]  # a shorter window


def test_plain_runs_are_their_own_groups_and_loss_is_against_the_step(tiny_sweep, tmp_path, capsys):
    runs = [tiny_sweep.out / "window.long=8__seed=3", tiny_sweep.out / "window.long=16__seed=4"]
    assert main(["compare", *map(str, runs), "--metric", "loss", "--out", str(tmp_path / "loss")]) == 0
    comparison = json.loads((tmp_path / "loss.json").read_text())
    assert [group["label"] for group in comparison["groups"]] == [run.name for run in runs]
    for group, run in zip(comparison["groups"], runs):
        records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        losses = [record["loss"] for record in records if "loss" in record]
        assert group["curve"]["x"] == [1, 2, 3] and group["curve"]["mean"] == losses and group["curve"]["runs"] == [1] * 3
        assert group["state"]["length"] == 48
    assert (tmp_path / "loss.png").is_file() and "| window.long=8__seed=3 | 1 | 8 |" in capsys.readouterr().out


def test_one_grid_point_of_a_sweep_is_named_as_its_subfolder(tiny_sweep, tmp_path):
    point, run = tiny_sweep.out / "window.long=16", tiny_sweep.out / "window.long=8__seed=3"
    assert main(["compare", str(point), str(run), "--out", str(tmp_path / "cmp")]) == 0
    groups = json.loads((tmp_path / "cmp.json").read_text())["groups"]
    assert [group["label"] for group in groups] == [f"{tiny_sweep.out.name}/window.long=16", run.name]
    assert [entry["folder"] for entry in groups[0]["runs"]] == [str(tiny_sweep.out / f"window.long=16__seed={seed}")
                                                                 for seed in (3, 4)]


def last(folder, key):
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    return [record[key] for record in records if key in record][-1]


@pytest.mark.parametrize("target, flags, words", [
    ("nothing", [], "nothing: no such folder"),
    ("failed-sweep/window.long=99", [], "no such folder, nor a grid point of the sweep"),
    ("empty", [], "empty: not a run folder (no spec.yaml) nor a sweep (no sweep.json)"),
    ("run", ["--metric", "perplexity"], "a run of the niah task has no perplexity"),
    ("run", ["--window", "99"], "no niah results at test window 99 (eval-window99.json); `layerzoo eval"),
    ("run", ["--window", "0"], "--window must be >= 1"),
    ("bad-sweep", [], "sweep.json: not a sweep manifest"),
    ("failed-sweep", [], "has results to compare: "),
])
def test_bad_inputs_are_one_line(target, flags, words, tiny_sweep, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    (tmp_path / "bad-sweep").mkdir()
    (tmp_path / "bad-sweep" / "sweep.json").write_text("[1, 2]")
    shutil.copytree(tiny_sweep.out / "window.long=8__seed=3", tmp_path / "run")
    failed = tmp_path / "failed-sweep"  # a sweep whose only run has no report
    failed.mkdir()
    shutil.copy(tiny_sweep.out / "sweep.json", failed)
    folder = tmp_path / target
    assert main(["compare", str(folder), *flags]) == 2
    error = capsys.readouterr().err
    assert words in error and error.count("\n") == 1, error


def test_the_hint_for_a_run_on_its_specs_windows_names_no_window(tiny_sweep, tmp_path, capsys):
    run = tmp_path / "run"
    shutil.copytree(tiny_sweep.out / "window.long=8__seed=3", run)
    spec = yaml.safe_load((run / "spec.yaml").read_text())
    spec["training"]["window"] = {"schedule": "fixed"}
    (run / "spec.yaml").write_text(yaml.safe_dump(spec))
    assert main(["compare", str(run)]) == 2
    error = capsys.readouterr().err
    assert f"no niah results at test window as in spec (eval-windowspec.json); `layerzoo eval {run}` writes them" in error, error
