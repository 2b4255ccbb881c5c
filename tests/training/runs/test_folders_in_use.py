"""A folder in use: while a process trains into a run folder (or sweeps into a sweep folder), a
second `train` or sweep there is refused in one line naming that process, and leaves the folder as
it was. The lock is the operating system's: one a killed process leaves behind is taken over. A
folder the run cannot write is refused in one line before anything in it changes."""

import os
import shutil
import signal
import subprocess
import sys

import pytest

from layerzoo.cli import main
from layerzoo.training.loop.trainer import train
from tests.helpers.run_checks import checkpoint_steps
from tests.training.runs.test_disk_full import files_of
from tests.training.sweeps.test_sweep_interrupt import STEPS, start_sweep


def test_a_second_sweep_or_train_into_folders_in_use_is_refused(tiny_spec, tmp_path, capsys):
    out = tmp_path / "sweep"
    sweep = start_sweep(tiny_spec, out, seeds=1)
    run = out / "seed=3"
    manifest, spec = (out / "sweep.json").read_bytes(), (run / "spec.yaml").read_bytes()
    try:
        assert main(["sweep", str(tiny_spec), "--out", str(out), "--set", f"training.steps={STEPS}"]) == 2
        error = capsys.readouterr().err
        assert error == (f"layerzoo: error: {out} is in use by process {sweep.pid} (layerzoo sweep); wait for it to "
                         "end or stop it, or choose another --out\n"), error
        for flags in ([], ["--resume"], ["--overwrite"]):
            assert main(["train", str(tiny_spec), "--out", str(run), "--set", f"training.steps={STEPS}", *flags]) == 2
            error = capsys.readouterr().err
            assert f"{run} is in use by process " in error and "(layerzoo train)" in error, error
            assert error.count("\n") == 1, error
        assert (out / "sweep.json").read_bytes() == manifest and (run / "spec.yaml").read_bytes() == spec
    finally:
        sweep.send_signal(signal.SIGTERM)
        sweep.communicate(timeout=300)
    assert sweep.returncode == 128 + signal.SIGTERM
    assert not list(tmp_path.rglob("layerzoo.lock"))  # each released with its folder


def test_a_lock_left_by_a_killed_process_is_taken_over(tiny_spec, tmp_path):
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    run = tmp_path / "run"
    run.mkdir()
    (run / "layerzoo.lock").write_text(f"{ended.stdout.strip()} layerzoo train\n")
    train(tiny_spec, ["training.steps=1"], run_dir=run, progress=False)
    assert checkpoint_steps(run) == [1] and not (run / "layerzoo.lock").exists()


def file_permissions_apply() -> list[str] | None:
    """The command prefix under which file permissions bind a process: none for a user; for root,
    setpriv without the capabilities that write anywhere. None where root has no setpriv."""
    if os.geteuid() != 0:
        return []
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"] if shutil.which("setpriv") else None


SCRIPT = """
import sys
from layerzoo.cli import main
spec, run = sys.argv[1:]
for flags in (["--overwrite"], ["--resume"]):
    print(main(["train", spec, "--out", run, "--no-progress", "--set", "training.steps=2", *flags]), flush=True)
"""


@pytest.mark.skipif(file_permissions_apply() is None, reason="root without setpriv writes anywhere")
@pytest.mark.parametrize("read_only", [".", "checkpoints"])
def test_a_run_folder_that_cannot_be_written_is_refused_before_it_changes(read_only, tiny_spec, tmp_path):
    run = train(tiny_spec, ["training.steps=2"], run_dir=tmp_path / "run", progress=False).run_dir
    folder = (run / read_only).resolve()
    folder.chmod(0o555)
    before = files_of(run)
    try:
        done = subprocess.run([*file_permissions_apply(), sys.executable, "-c", SCRIPT, str(tiny_spec), str(run)],
                              capture_output=True, text=True, timeout=600)
    finally:
        folder.chmod(0o755)
    assert done.stdout.split() == ["2", "2"], done.stderr
    errors = done.stderr.strip().splitlines()
    assert len(errors) == 2 and "Traceback" not in done.stderr, done.stderr
    assert all(line.startswith(f"layerzoo: error: {folder}: not writable (") for line in errors), errors
    assert files_of(run) == before
