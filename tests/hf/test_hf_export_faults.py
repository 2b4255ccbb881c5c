"""`layerzoo export` of a run that is saving a checkpoint, of a run without one, and an export that
fails half-way: one line and exit 2 when nothing can be exported, the newest complete checkpoint
when one can, and never a half-written folder."""

import errno
import shutil

import pytest

from layerzoo.cli import main
from layerzoo.hf import LayerzooForCausalLM
from layerzoo.training.runs import checkpoint as checkpoint_module
from tests.hf.test_hf_export import SHORT_RUN

STEP_2, STEP_3 = "step-00000002", "step-00000003"


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A run folder of swa-niah-tiny trained two steps: one checkpoint, step 2."""
    run = tmp_path_factory.mktemp("faults") / "run"
    assert main(["train", "swa-niah-tiny", *SHORT_RUN, "--out", str(run)]) == 0
    assert sorted(path.name for path in (run / "checkpoints").iterdir()) == [STEP_2]
    return run


@pytest.fixture
def run(trained, tmp_path):
    return shutil.copytree(trained, tmp_path / "run", symlinks=True)


def export(arguments, capsys) -> tuple[int, str, str]:
    """(exit code, stdout, stderr without transformers' progress bar) of `layerzoo export ARGUMENTS`."""
    capsys.readouterr()
    code = main(["export", *map(str, arguments)])
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip() and "Writing model shards" not in line]
    return code, out, "\n".join(lines)


@pytest.mark.parametrize("stage", ["checkpoint_spec", "read_meta", "read_tensors", "load_file"])
def test_export_while_the_run_saves_and_prunes_exports_the_newest_checkpoint(run, tmp_path, capsys, monkeypatch, stage):
    """The run saves step 3 and prunes step 2 (keep_checkpoints: 1) while the export reads step 2,
    at each stage of the read."""
    original = getattr(checkpoint_module, stage)
    checkpoints = run / "checkpoints"

    def racing(*args, **kwargs):
        if (checkpoints / STEP_2).exists():
            shutil.copytree(checkpoints / STEP_2, checkpoints / f"{STEP_3}.partial")
            (checkpoints / f"{STEP_3}.partial").rename(checkpoints / STEP_3)
            shutil.rmtree(checkpoints / STEP_2)
        return original(*args, **kwargs)

    monkeypatch.setattr(checkpoint_module, stage, racing)
    code, out, error = export([run, tmp_path / "hf"], capsys)
    assert code == 0 and f"exported {checkpoints / STEP_3} " in out, error
    assert LayerzooForCausalLM.from_pretrained(tmp_path / "hf") is not None


def test_export_while_the_first_checkpoint_is_written_is_one_line(run, tmp_path, capsys):
    checkpoints = run / "checkpoints"
    (checkpoints / STEP_2).rename(checkpoints / f"{STEP_2}.partial")  # the run's first save, unfinished
    code, _, error = export([run, tmp_path / "hf"], capsys)
    assert code == 2 and "no checkpoint there" in error and error.count("\n") == 0, error
    assert not (tmp_path / "hf").exists()
    shutil.rmtree(checkpoints)  # killed before its first save
    code, _, error = export([run, tmp_path / "hf"], capsys)
    assert code == 2 and "no checkpoint there" in error and error.count("\n") == 0, error
    assert not (tmp_path / "hf").exists()


@pytest.mark.parametrize("existing", [False, True])
def test_an_export_that_fails_half_way_leaves_nothing(run, tmp_path, capsys, monkeypatch, existing):
    original = LayerzooForCausalLM.save_pretrained

    def disk_full(self, folder, **kwargs):
        original(self, folder, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(LayerzooForCausalLM, "save_pretrained", disk_full)
    out = tmp_path / "hf"
    if existing:
        out.mkdir()
    code, _, error = export([run, out], capsys)
    assert code == 2 and "No space left on device" in error and error.count("\n") == 0, error
    assert (list(out.iterdir()) == [] if existing else not out.exists())
    assert sorted(path.name for path in tmp_path.iterdir()) == (["hf", "run"] if existing else ["run"])


@pytest.mark.parametrize("name", [".", "absolute"])
def test_export_into_the_empty_working_directory(run, tmp_path, capsys, monkeypatch, name):
    """An existing empty folder is filled in place (a rename onto it would fail on the working
    directory or a mount point, or replace the folder a shell stands in)."""
    out = tmp_path / "hf"
    out.mkdir()
    monkeypatch.chdir(out)
    code, _, error = export([run, "." if name == "." else out], capsys)
    assert code == 0, error
    assert sorted(path.name for path in out.iterdir()) == ["config.json", "generation_config.json", "model.safetensors"]
    assert out.samefile(".")  # still the folder the process stands in
    assert LayerzooForCausalLM.from_pretrained(out) is not None
