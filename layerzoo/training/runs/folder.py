"""A run folder holds one run: spec.yaml (written when the run starts), metrics.jsonl,
checkpoints/, the eval-window* reports, and for text runs text-report.json, the
perplexity-window* reports, loss.png and tensorboard/, and tokenizer/ when a file describes the
task's tokenizer (a trained BPE lives in the user's cache otherwise, where a run copied to
another machine, or a cleared cache, loses it; `layerzoo export` carries it).

Training into a folder that holds anything needs `resume` (continue the run that is there) or
`overwrite` (remove that run's files first; files that are not a run's are left alone), so two
runs never mix: mixed, the older run's higher-numbered checkpoint would be the one loaded.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ...specs import Spec
from ...tasks.text.cache import written_whole
from ..errors import TrainingError
from .lock import LOCK, not_writable

RUN_FILES = ("spec.yaml", "metrics.jsonl", "metrics.jsonl.partial", "checkpoints", "eval-window*.json", "eval-window*.png",
             "text-report.json", "perplexity-window*.json", "perplexity-window*.png", "loss.png", "tensorboard",
             "tokenizer", "tokenizer.partial-*")


def default_run_dir(spec: Spec) -> Path:
    """runs/<spec name>; a name that is not one plain folder name (`../x`, `a/b`) is refused."""
    name = spec.name or "run"
    if name in (".", "..") or Path(name).name != name:
        raise TrainingError(f"spec name {name!r} cannot name a folder under runs/; give the spec a plain name "
                            "or choose the run folder with --out")
    return Path("runs") / name


def check_run_folder(run_dir: Path, resume: bool, overwrite: bool, files: tuple[str, ...] = RUN_FILES) -> None:
    """Refuse a folder the run cannot write, and to start a new run in a folder that holds anything
    (but a lock file), unless resuming or overwriting. files: the patterns of a run's files (a
    distillation's are its own)."""
    if not run_dir.exists():
        return
    if not run_dir.is_dir():
        raise TrainingError(f"{run_dir} is a file, not a folder")
    check_writable(run_dir, files)
    if resume or overwrite:
        return
    ours = sorted(path.name for path in run_files(run_dir, files))
    if ours:
        raise TrainingError(f"{run_dir} already holds a run ({', '.join(ours[:4])}); continue it with --resume, "
                            "replace it with --overwrite, or choose another --out")
    others = sorted(path.name for path in run_dir.iterdir() if path.name != LOCK)
    if others:
        raise TrainingError(f"{run_dir} is not empty ({', '.join(others[:3])}); choose another --out, or train "
                            "there with --overwrite (it removes only a run's files)")


def check_writable(run_dir: Path, files: tuple[str, ...] = RUN_FILES) -> None:
    """Refuse, before anything changes, a run folder in which training could not write, replace or
    remove its files: the folder itself and the run's folders in it (checkpoints/, tensorboard/)."""
    folders = [run_dir, *(inner for path in run_files(run_dir, files) if path.is_dir()
                          for inner in (path, *path.rglob("*")) if inner.is_dir())]
    for folder in folders:
        if not os.access(folder, os.W_OK | os.X_OK):
            raise not_writable(folder, "no write permission")


def start_run_folder(run_dir: Path, spec: Spec, overwrite: bool, tokenizer: dict[str, Path],
                     files: tuple[str, ...] = RUN_FILES) -> None:
    """Remove the previous run's files (those matching `files`) when overwriting, then write the
    resolved spec and a copy of the task's tokenizer files ({name: file}, see
    Task.tokenizer_files) into tokenizer/."""
    if overwrite and run_dir.is_dir():
        for path in run_files(run_dir, files):
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()
    run_dir.mkdir(parents=True, exist_ok=True)
    spec.save(run_dir / "spec.yaml")
    if tokenizer:  # on --resume the task's replaces the run's copy: the same files unless the corpus changed
        shutil.rmtree(run_dir / "tokenizer", ignore_errors=True)
        written_whole(run_dir / "tokenizer", lambda folder: copy_files(tokenizer, folder))


def copy_files(files: dict[str, Path], folder: Path) -> None:
    """Each file of {name: file} to folder/name."""
    for name, file in files.items():
        shutil.copyfile(file, folder / name)


def report_stem(kind: str, window: int | None) -> str:
    """A report's file name without its extension: `eval-window16`, `perplexity-windowspec`
    (kind "eval" or "perplexity", or one and a model's name: `perplexity-teacher`; window None: the
    spec's own windows)."""
    return f"{kind}-window{window or 'spec'}"


def final_reports(spec: Spec) -> list[str]:
    """The JSON reports `layerzoo train` writes after the last step: a text run's summary (and its
    perplexity report when it has eval lengths), else the length x depth grid."""
    config = spec.training
    if config.task.name != "text":
        return [f"{report_stem('eval', config.test_window)}.json"]
    return ["text-report.json"] + ([f"{report_stem('perplexity', config.test_window)}.json"] if config.eval.lengths else [])


def run_files(run_dir: Path, files: tuple[str, ...] = RUN_FILES) -> list[Path]:
    return [path for pattern in files for path in run_dir.glob(pattern)]


def run_bytes(run_dir: Path, files: tuple[str, ...] = RUN_FILES) -> int:
    """The size of the run's files in `run_dir` (what --overwrite frees)."""
    paths = [inner for path in run_files(run_dir, files) for inner in (path, *path.rglob("*"))] if run_dir.is_dir() else []
    return sum(path.stat().st_size for path in paths if path.is_file())
