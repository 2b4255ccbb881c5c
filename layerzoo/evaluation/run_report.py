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
    """The reports of a finished training run, written into its folder and printed: text's
    summary and perplexity report, or the accuracy grid at the test window. Returns them."""
    autocast = autocast_context(result.spec.training, result.context)
    if result.task.name == "text":
        return text_report(result.model, result.spec, result.task, result.run_dir, result.metrics,
                           context=result.context, autocast=autocast)
    return grid_report(result.model, result.spec, result.task, result.run_dir, context=result.context,
                       autocast=autocast)


def train_and_report(spec: str | Path | Spec, overrides: list[str] = (), **options) -> RunResult:
    """train(spec, overrides, **options), then report_run on it, the run folder locked until its
    reports are written and the process group (under torchrun) left at the end."""
    with contextlib.ExitStack() as holding:
        result = train(spec, overrides, holding=holding, **options)
        try:
            report_run(result)
        finally:
            teardown(result.context)
    return result
