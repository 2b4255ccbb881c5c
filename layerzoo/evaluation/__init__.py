"""Evaluation of models and runs: NIAH accuracy grids and perplexity against context length, the
reports and plots a run writes, and `layerzoo eval` (`evaluate`), which reads training runs,
distill runs and model folders and scores them alone or side by side.

Names load on first use, so that `layerzoo eval`'s settings are checked before torch is imported.
"""

from __future__ import annotations

import importlib

_NAMES = {
    "evaluate": "scoring", "EvalSettings": "settings", "EvaluationError": "reading",
    "evaluate_grid": "grid", "format_table": "grid", "perplexity_by_length": "perplexity",
    "grid_report": "grid_report", "text_report": "text_report", "report_run": "run_report",
    "plot_heatmap": "heatmap", "plot_perplexity": "perplexity_plot", "load_model_folder": "reading",
}


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(f".{_NAMES[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = list(_NAMES)
