"""`layerzoo distill` over two gloo processes (one torchrun launch, parallel_worker.py) against one
process, both stages: context 2 (each sequence split into two pieces) on rows and on packed
examples whose boundaries fall inside pieces, and data parallel 2 through the CLI's path; every
logged value and the final student's weights are one process's to fp32 rounding, the run folders
hold the same files. Bad input is refused in one line before anything is written."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from layerzoo.convert import Conversion, distill_folder
from layerzoo.training.distill.config import distillation_spec
from layerzoo.training.distill.run import distill
from layerzoo.training.parallel.context import ContextError
from tests.helpers.conversion import distill_folders
from tests.helpers.run_checks import metric_records, without_timing

REPO = Path(__file__).resolve().parents[3]
ROWS = ["distill.data.pack=false"]
# three packed rows of 32 tokens: the pieces meet inside the second, in the middle of a document
PACKED = ["distill.align.batch_size=3", "distill.end_to_end.batch_size=3"]
CONTEXT = ["distill.context=2"]
# {run under torchrun: (the one-process run it equals, its overrides)}
CONTEXT_RUNS = {"context-rows": ("one-rows", ROWS + CONTEXT), "context-packed": ("one-packed", PACKED + CONTEXT)}
DATA_RUN = ("one-rows", ROWS)
UNEVEN = ["distill.align.batch_size=3"]  # three sequences over two data-parallel processes
STAGES = ("align", "end_to_end")


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The folder of every run: one process's ("one-rows", "one-packed") and the torchrun launch's
    (its runs, their students' weights <run>.pt, report.json)."""
    folders = distill_folders(tmp_path_factory.mktemp("parallel"))
    out = folders.root
    students = {"one-rows": distill_folder(folders.converted, out / "one-rows", folders.config, ROWS,
                                           progress=False).student}
    conversion = Conversion.load(folders.converted)
    spec = distillation_spec(conversion.student.config, folders.config, PACKED)
    students["one-packed"] = distill(conversion, spec, out / "one-packed", progress=False).student
    for name, student in students.items():
        torch.save(student.state_dict(), out / f"{name}.pt")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               str(Path(__file__).with_name("parallel_worker.py")), str(folders.converted), str(folders.config), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # a hang (a collective one rank never reaches) fails here rather than stalling CI
    done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def assert_same_run(runs: Path, name: str, reference: str) -> None:
    """Run `name` logged what `reference` logged, to fp32 rounding, and ended with its weights."""
    for stage in STAGES:
        ours, theirs = (without_timing(metric_records(runs / run / stage)) for run in (name, reference))
        assert [sorted(record) for record in ours] == [sorted(record) for record in theirs], stage
        for mine, one in zip(ours, theirs):
            measured = {key: value for key, value in one.items() if isinstance(value, float)}
            assert {key: mine[key] for key in measured} == pytest.approx(measured, rel=1e-5, abs=1e-6), (stage, one)
            assert {key: value for key, value in mine.items() if key not in measured} == {
                key: value for key, value in one.items() if key not in measured}
    ours, theirs = torch.load(runs / f"{name}.pt"), torch.load(runs / f"{reference}.pt")
    assert ours.keys() == theirs.keys()
    for key, tensor in theirs.items():
        torch.testing.assert_close(ours[key], tensor, rtol=1e-5, atol=1e-6, msg=key)
    assert files(runs / name) == files(runs / reference)  # rank 1 wrote nothing of its own


def files(folder: Path) -> set[str]:
    """The paths under folder, but the exported student's (only distill_folder writes one)."""
    return {str(path.relative_to(folder)) for path in folder.rglob("*") if path.relative_to(folder).parts[0] != "model"}


@pytest.mark.parametrize("name", CONTEXT_RUNS)
def test_context_two_distils_as_one_process(runs, name):
    assert_same_run(runs, name, CONTEXT_RUNS[name][0])


def test_data_parallel_two_through_the_cli_path_distils_as_one_process(runs):
    assert_same_run(runs, "data", DATA_RUN[0])
    assert files(runs / "data" / "model") == files(runs / DATA_RUN[0] / "model")


def test_a_batch_that_does_not_split_over_the_processes_is_refused_in_one_line(runs):
    refused = json.loads((runs / "report.json").read_text())["refused"]
    assert refused == ("distill.align.batch_size 3 does not split over 2 data-parallel groups (2 processes, "
                       "context 1)")
    assert not (runs / "uneven").exists()


def test_a_context_that_does_not_divide_the_processes_is_refused_in_one_line(tmp_path):
    folders = distill_folders(tmp_path)
    with pytest.raises(ContextError, match="dividing the world size 1") as error:
        distill_folder(folders.converted, tmp_path / "run", folders.config, CONTEXT, progress=False)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run").exists()  # refused before the run folder is written
