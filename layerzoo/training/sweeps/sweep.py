"""`layerzoo sweep`: a spec trained at every point of a grid of overrides with several seeds, each
run an ordinary `layerzoo train` process in its own run folder under the sweep folder, J at a time.

Every run folder stays an ordinary run: a finished one (its last checkpoint and final reports
written) is skipped, one with checkpoints is continued with --resume, any other is started afresh
with --overwrite (which keeps its log). A run that fails is reported, and the others go on. SIGINT
or SIGTERM to the sweep stops it: the running runs save a checkpoint, and no other starts; so does
SIGKILL, each run noticing that its sweep is gone. While a sweep runs, its folder is locked: a
second sweep into it is refused (as is a second `train` into a run folder in use). The
threads of the machine (torch's count in this process: its cores, or OMP_NUM_THREADS) are divided
between the J processes, so that they do not oversubscribe the cores.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from ...specs import Spec, load_spec
from ..errors import ComparisonError, TrainingError
from ..loop.interrupt import TrainingInterrupted
from ..runs.folder import final_reports
from ..runs.lock import hold
from ..runs.run_checkpoints import checkpoint_dir, run_checkpoints
from .compare import compare, to_markdown, write_comparison
from .plan import MAX_RUNS, SweepRun, parse_grid, plan, shape, spec_argument, write_manifest
from .processes import RunProcesses

LOG = "train.log"  # each run's output, in its folder; appended to, so a resumed run keeps the earlier attempt's


@dataclass(frozen=True)
class Outcome:
    run: SweepRun
    status: str  # "skipped" (finished before), "done", "failed", "stopped" (by a signal), "not started"
    seconds: float = 0.0
    error: str = ""  # a failed run's last line of output: its one-line error


def run_sweep(spec: str, grid: list[str], seeds: int, out: str | Path, *, jobs: int = 1, overrides: list[str] = (),
              max_runs: int = MAX_RUNS, echo: Callable[[str], None] = print) -> list[Outcome]:
    """Train `spec` (with `overrides`) at every point of `grid` (`KEY=V1,V2,...` strings) with
    `seeds` seeds (training.seed = the spec's seed + 0 .. seeds - 1), `jobs` processes at a time,
    into <out>/<run name>; then print the comparison of the finished runs and write it as
    <out>/compare-<metric>.md, .json and .png. Returns each run's outcome, in plan order.
    A plan of more than `max_runs` runs is refused."""
    out, spec, overrides = Path(out), spec_argument(spec), list(overrides)
    base = load_spec(spec, overrides)
    if base.training is None:
        raise TrainingError(f"spec {base.name or spec} has no training: section to train with")
    points = parse_grid(grid)
    runs = plan(points, range(base.training.seed, base.training.seed + seeds), max_runs)
    threads = max(1, torch.get_num_threads() // jobs)
    echo(f"sweep of {spec}: {len(runs)} runs ({shape(points, seeds)}) in {out}, {jobs} at a time with {threads} "
         "threads each")
    specs = {run.name: load_spec(spec, [*overrides, *run.overrides]) for run in runs}  # a bad value fails here, not in N runs
    with hold(out, "layerzoo sweep"):  # a second sweep into the folder is refused while this one runs
        write_manifest(out, spec, overrides, runs)
        outcomes = {run.name: Outcome(run, "skipped") for run in runs if finished(out / run.name, specs[run.name])}
        todo = [run for run in runs if run.name not in outcomes]
        for name in outcomes:
            echo(f"{name}: finished before, skipped")
        with RunProcesses() as processes, ThreadPoolExecutor(jobs) as pool:
            futures = [pool.submit(train_run, processes, spec, [*overrides, *run.overrides], run, out / run.name,
                                   threads) for run in todo]
            for future in as_completed(futures):
                outcome = future.result()
                outcomes[outcome.run.name] = outcome
                if outcome.status != "not started":
                    echo(progress_line(outcome, out, len(outcomes), len(runs)))
        if processes.received is not None:
            raise stop_message(processes.received, list(outcomes.values()))
        summarise(out, echo)
    failed = [run.name for run in runs if outcomes[run.name].status == "failed"]
    if failed:
        echo(f"{len(failed)} of {len(runs)} runs failed ({', '.join(failed)}); their train.log says why, "
             "and the same command resumes or restarts them")
    return [outcomes[run.name] for run in runs]


def finished(run_dir: Path, spec: Spec) -> bool:
    """Whether the run folder holds the run's last checkpoint and the reports training ends with."""
    return (checkpoint_dir(run_dir, spec.training.steps).is_dir()
            and all((run_dir / name).is_file() for name in final_reports(spec)))


def train_run(processes: RunProcesses, spec: str, overrides: list[str], run: SweepRun, run_dir: Path,
              threads: int) -> Outcome:
    """One `layerzoo train` process for `run`, its output appended to <run_dir>/train.log; none
    once the sweep has been told to stop."""
    if processes.received is not None:  # before its folder is made
        return Outcome(run, "not started")
    resume = bool(run_checkpoints(run_dir))
    command = [sys.executable, "-m", "layerzoo", "train", spec, *(arg for item in overrides for arg in ("--set", item)),
               "--out", str(run_dir), "--no-progress", "--resume" if resume else "--overwrite"]
    run_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    with (run_dir / LOG).open("a") as log:
        log.write(f"$ OMP_NUM_THREADS={threads} {shlex.join(command)}\n")
        log.flush()
        code = processes.run(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    seconds = time.perf_counter() - started
    if code is None:
        return Outcome(run, "not started")
    if code == 0:
        return Outcome(run, "done", seconds)
    if processes.received is not None and code == 128 + processes.received:
        return Outcome(run, "stopped", seconds)
    lines = [line for line in (run_dir / LOG).read_text().splitlines() if line.strip()]
    return Outcome(run, "failed", seconds, f"exit {code}: {lines[-1] if lines else 'no output'}")


def stop_message(signum: signal.Signals, outcomes: list[Outcome]) -> TrainingInterrupted:
    """What a sweep stopped by a signal says: which runs it stopped, and that rerunning resumes them."""
    stopped = [outcome.run.name for outcome in outcomes if outcome.status == "stopped"]
    waiting = sum(outcome.status == "not started" for outcome in outcomes)
    return TrainingInterrupted(f"sweep stopped by {signum.name}; a checkpoint saved by: {', '.join(stopped) or 'no run'}; "
                               f"runs not started: {waiting}; the same command resumes the sweep", signum)


def progress_line(outcome: Outcome, out: Path, count: int, total: int) -> str:
    """The progress line of a run that ended."""
    if outcome.status == "done":
        return f"[{count}/{total}] {outcome.run.name}: done in {outcome.seconds:.1f} s"
    if outcome.status == "stopped":
        return f"[{count}/{total}] {outcome.run.name}: stopped by the signal after {outcome.seconds:.1f} s, at a checkpoint"
    return f"[{count}/{total}] {outcome.run.name}: FAILED after {outcome.seconds:.1f} s ({outcome.error}); " \
           f"log: {out / outcome.run.name / LOG}"


def summarise(out: Path, echo: Callable[[str], None]) -> None:
    """Print the comparison of the sweep's finished runs and write it beside them: on their
    default metric, or on the training loss when they have no results for it (a text run
    without eval lengths has no perplexity report)."""
    try:
        comparison = compare([out])
    except ComparisonError:
        try:
            comparison = compare([out], "loss")
        except ComparisonError as error:
            echo(f"no summary: {error}")
            return
    paths = write_comparison(comparison, out / f"compare-{comparison['metric']}")
    echo(to_markdown(comparison) + f"wrote {', '.join(map(str, paths))}")
