"""`export_run`: a training run's newest checkpoint as a transformers folder (`layerzoo export RUN OUT_DIR`);
`export_model`: a model in memory (a distillation's student) likewise, with its run's tokenizer.

The folder holds config.json (the resolved model section), model.safetensors and
generation_config.json, and the run's tokenizer when it has one, by this convention: a
`tokenizer/` folder in the run folder (what training writes for a task whose tokenizer is a
file, a trained BPE or a tokenizer folder; or what a tokenizer's save_pretrained writes) is
copied file by file, else a `tokenizer.json` there (a `tokenizers` file) is copied alone;
AutoTokenizer reads either, as the fast tokenizer that file describes. The folder is written
whole or not at all.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

from ..assemblies.causal_lm import CausalLM
from ..tasks.text.cache import written_whole
from ..training.runs.checkpoint import load_weights, read_checkpoint
from ..training.runs.run_checkpoints import load_newest
from .config import LayerzooConfig
from .errors import HFError
from .model import LayerzooForCausalLM, check_exportable
from .quiet import no_transformers_bars


def export_run(run: str | Path, out_dir: str | Path) -> Path:
    """Write the newest usable checkpoint of `run` (a run folder, or one checkpoint folder) and
    the run's tokenizer to `out_dir`, which must be new or empty; returns the checkpoint exported.

    Args:
        run: a training run's folder, or one of its checkpoint folders.
        out_dir: the folder to write, new or empty; written whole or not at all.

    Returns:
        The checkpoint folder exported.

    Raises:
        HFError: run is not a folder; out_dir exists and is not an empty folder; the run's spec is
            an ARMT one.
        CheckpointError: the run has no checkpoint, or none that can be read.
    """
    run, out_dir = Path(run), Path(out_dir)
    if not run.is_dir():
        raise HFError(f"{run}: no such run folder")
    check_empty(out_dir)

    def load(folder: Path) -> tuple[Path, LayerzooForCausalLM]:
        checkpoint = read_checkpoint(folder, training_state=False)
        check_exportable(checkpoint.spec)
        model = LayerzooForCausalLM(LayerzooConfig.from_model_config(checkpoint.spec.model))
        load_weights(checkpoint, model.model)
        return checkpoint.directory, model

    checkpoint, model = load_newest(run, load)
    run = checkpoint.parent.parent if checkpoint.parent.name == "checkpoints" else run
    write_folder(model, run, out_dir)
    return checkpoint


def export_model(model: CausalLM, run: str | Path, out_dir: str | Path) -> Path:
    """Write a CausalLM in memory (its weights unchanged) and the tokenizer of the run folder
    `run` to `out_dir`, which must be new or empty; returns out_dir.

    Args:
        model: the CausalLM (a distillation's student, say).
        run: the run folder whose tokenizer goes with it (none there: no tokenizer is written).
        out_dir: the folder to write, new or empty; written whole or not at all.

    Returns:
        out_dir, as a Path.

    Raises:
        HFError: out_dir exists and is not an empty folder.
    """
    out_dir = Path(out_dir)
    check_empty(out_dir)
    wrapper = LayerzooForCausalLM(LayerzooConfig.from_model_config(model.config))
    wrapper.model.load_state_dict(model.state_dict())
    write_folder(wrapper, Path(run), out_dir)
    return out_dir


def check_empty(out_dir: Path) -> None:
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        raise HFError(f"{out_dir}: exists and is not an empty folder; export into a new one")


def write_folder(model: LayerzooForCausalLM, run: Path, out_dir: Path) -> None:
    """model.save_pretrained and the run's tokenizer into out_dir (new, or empty), whole or not at all."""
    def write(folder: Path) -> None:
        with no_transformers_bars():  # one small file, written in a blink: export prints its own line
            model.save_pretrained(folder)
        copy_tokenizer(run, folder)

    if out_dir.is_dir():  # empty, as checked
        fill(out_dir, write)
    else:
        written_whole(out_dir, write)  # a failed or interrupted export leaves no folder that looks like one


def fill(out_dir: Path, write: Callable[[Path], None]) -> None:
    """An existing empty folder filled by write(folder): written whole into a hidden folder in it
    (renaming a folder onto out_dir itself fails on a mount point, and would replace the working
    directory), then moved up file by file, config.json last, so that it reads as a model only
    once complete; a failure before the moves leaves it empty."""
    inner = written_whole(out_dir / ".layerzoo-export", write)
    for path in sorted(inner.iterdir(), key=lambda path: path.name == "config.json"):
        os.replace(path, out_dir / path.name)
    inner.rmdir()


def copy_tokenizer(run: Path, out_dir: Path) -> None:
    """The run's `tokenizer/` folder's files, else its tokenizer.json, into out_dir (nothing when it has neither)."""
    folder = run / "tokenizer"
    files = sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else [run / "tokenizer.json"]
    for path in files:
        if path.is_file():
            shutil.copy2(path, out_dir / path.name)
