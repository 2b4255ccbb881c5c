"""A full disk: a checkpoint save that runs out of space removes its partial folder and stops the
run in one line saying what the save needs and where, the checkpoints saved before it untouched;
a run that starts or resumes where there is no room for a checkpoint is refused in one line
before it writes anything; a sweep that cannot write its manifest or lock leaves nothing behind."""

import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from safetensors import SafetensorError

from layerzoo.cli import main
from layerzoo.training.loop.trainer import train
from layerzoo.training.runs import checkpoint

SAVE_SIZE = re.compile(r"needs [0-9.]+ (Ki|Mi|Gi)?B")


def train_args(spec, run_dir, *flags, steps=4):
    return ["train", str(spec), "--out", str(run_dir), "--no-progress", "--set", f"training.steps={steps}",
            "--set", "training.checkpoint_every=2", *flags]


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in sorted(folder.rglob("*")) if path.is_file()}


@pytest.fixture
def run(tiny_spec, tmp_path):
    """A 4-step run stopped after its checkpoint at step 2, as a kill then leaves it."""
    run_dir = train(tiny_spec, ["training.steps=4", "training.checkpoint_every=2"], run_dir=tmp_path / "run",
                    progress=False).run_dir
    shutil.rmtree(run_dir / "checkpoints" / "step-00000004")
    return run_dir


def fill_the_disk_at(monkeypatch, name):
    """Writing checkpoint file `name` fails as it does on a full disk: safetensors' error for
    ENOSPC (a test_a_real_full_disk sees), or Python's for trainer.json; the file is left behind."""
    save, write = checkpoint.save_file, Path.write_text

    def save_full(tensors, path):
        save(tensors, path)
        if Path(path).name == name:
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")

    def write_full(self, *args, **kwargs):
        write(self, *args, **kwargs)
        if self.name == name:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(checkpoint, "save_file", save_full)
    monkeypatch.setattr(Path, "write_text", write_full)


@pytest.mark.parametrize("full_at", ["model.safetensors", "trainer.safetensors", "trainer.json"])
def test_a_full_disk_during_a_save_stops_the_run_in_one_line(full_at, run, tiny_spec, monkeypatch, capsys):
    before = files_of(run / "checkpoints")
    fill_the_disk_at(monkeypatch, full_at)
    assert main(train_args(tiny_spec, run, "--resume")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "Traceback" not in error, error
    assert f"{run}/checkpoints/step-00000004: not saved" in error and "the disk is full" in error, error
    assert SAVE_SIZE.search(error) and "--resume" in error, error
    assert files_of(run / "checkpoints") == before  # no .partial folder; step 2 as it was


def test_a_full_disk_when_logging_a_step_names_the_log(run, tiny_spec, monkeypatch, capsys):
    opened = Path.open

    def full(self, mode="r", *args, **kwargs):
        if self.name == "metrics.jsonl" and mode == "a":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return opened(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    assert main(train_args(tiny_spec, run, "--resume")) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{run}/metrics.jsonl: not saved, the disk is full" in error, error


def test_a_full_disk_when_a_sweep_writes_its_manifest_leaves_nothing(tiny_spec, tmp_path, monkeypatch, capsys):
    fill_the_disk_at(monkeypatch, "sweep.json.partial")
    out = tmp_path / "sweep"
    assert main(["sweep", str(tiny_spec), "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"layerzoo: error: {out}/sweep.json: not written (No space left on device)\n"
    assert not out.exists()


@pytest.mark.parametrize("flags", [["--resume"], []])
def test_a_run_with_no_room_for_a_checkpoint_is_refused_before_it_writes(flags, run, tiny_spec, tmp_path, monkeypatch,
                                                                          capsys):
    run_dir = tmp_path / "new" if not flags else run
    before = files_of(run_dir) if run_dir.exists() else None
    monkeypatch.setattr(shutil, "disk_usage", lambda path: SimpleNamespace(total=10**9, used=10**9 - 4096, free=4096))
    fill_the_disk_at(monkeypatch, "model.safetensors")
    assert main(train_args(tiny_spec, run_dir, *flags)) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and f"{run_dir}: the disk is full" in error, error
    assert SAVE_SIZE.search(error) and "4.0 KiB free" in error, error
    assert (files_of(run_dir) if run_dir.exists() else None) == before


def private_mounts() -> list[str] | None:
    """The command prefix that runs a command in a mount namespace of its own (root's, or an
    unprivileged user's), so that a tmpfs it mounts is nobody else's; None where neither works."""
    if not shutil.which("unshare"):
        return None
    for prefix in (["unshare", "-m"], ["unshare", "-Urm"]):
        if subprocess.run([*prefix, "true"], capture_output=True).returncode == 0:
            return prefix
    return None


SCRIPT = """
import os
import sys
from layerzoo.cli import main
args = sys.argv[1:]
disk = os.path.dirname(args[3])
print("train", main(args), flush=True)
print("resume", main(args + ["--resume"]), flush=True)
with open(disk + "/filler", "wb", buffering=0) as filler:  # the last bytes of the disk
    try:
        while True:
            filler.write(bytes(4096))
    except OSError:
        pass
print("sweep", main(["sweep", args[1], "--out", disk + "/sweep"]), flush=True)
"""


@pytest.mark.skipif(private_mounts() is None, reason="mounts a small tmpfs in a private mount namespace")
def test_a_real_full_disk(run, tiny_spec, tmp_path):
    """On a tmpfs with room for one checkpoint and a half: the second save fails, the rerun is
    refused; with the disk then filled to the last byte, so is a sweep, leaving no lock file."""
    size = sum(len(data) for data in files_of(run / "checkpoints").values()) * 3 // 2 // 1024
    disk = tmp_path / "disk"
    disk.mkdir()
    args = train_args(tiny_spec, disk / "run")
    script = (f'mount -t tmpfs -o size={size}k tmpfs "$1" && shift && "$@"; code=$?; '
              f'find "{disk}" -name "*.partial" -o -name layerzoo.lock -o -name sweep; exit $code')
    done = subprocess.run([*private_mounts(), "sh", "-c", script, "sh", str(disk), sys.executable, "-c", SCRIPT, *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if not line.startswith("sweep of")]
    assert lines == ["train 2", "resume 2", "sweep 2"], done.stdout  # and find found nothing left behind
    first, second, third = [line for line in done.stderr.splitlines() if line.startswith("layerzoo: error:")]
    assert first.startswith(f"layerzoo: error: {disk}/run/checkpoints/step-00000004: not saved"), done.stderr
    assert second.startswith(f"layerzoo: error: {disk}/run: the disk is full"), done.stderr
    assert third.startswith(f"layerzoo: error: {disk}/sweep: not writable (No space left on device)"), done.stderr
    assert "Traceback" not in done.stderr and not any(disk.iterdir())  # the tmpfs was private to the command
