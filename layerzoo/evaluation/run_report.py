"""`layerzoo train` from Python: a spec trained, then its run reported as the command does (the
NIAH or accuracy grid of a synthetic task, the validation loss and perplexity of text)."""

from __future__ import annotations

import contextlib
from pathlib import Path

from ..specs import Spec
from ..training.loop.trainer import RunResult, autocast_context, train
from ..training.parallel.distributed import teardown
from .grid_report import grid_report
from .text_report import text_report


def report_run(result: RunResult) -> dict:
    """The reports of a finished training run, written into its folder and printed.

    Args:
        result: what `train` returned.

    Returns:
        The text task's summary (its perplexity report written beside it), or the accuracy grid
            at the test window.
    """
    autocast = autocast_context(result.spec.training, result.context)
    if result.task.name == "text":
        return text_report(result.model, result.spec, result.task, result.run_dir, result.metrics,
                           context=result.context, autocast=autocast)
    return grid_report(result.model, result.spec, result.task, result.run_dir, context=result.context,
                       autocast=autocast)


def train_and_report(spec: str | Path | Spec, overrides: list[str] = (), **options) -> RunResult:
    """`layerzoo train`: train the spec, then report_run on it, the run folder locked until its
    reports are written and the process group (under torchrun) left at the end.

    Args:
        spec: a shipped spec's name, a YAML path or a Spec, with a `training:` section.
        overrides: `KEY=VALUE` strings, as --set takes them.
        **options: train's keywords: run_dir, resume, overwrite, progress.

    Returns:
        train's RunResult: the run folder, the trained model, its spec, task and last metrics.
    """
    with contextlib.ExitStack() as holding:
        result = train(spec, overrides, holding=holding, **options)
        try:
            report_run(result)
        finally:
            teardown(result.context)
    return result
