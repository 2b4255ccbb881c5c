"""Loss curves from run folders' metrics.jsonl: training and validation loss, learning rate and
SWA window against the step, several runs overlaid, as a PNG (matplotlib, Agg)."""

from __future__ import annotations

import json
from pathlib import Path

from .metrics import read_records


def plot_runs(run_dirs: list[str | Path], path: str | Path, loss_label: str = "loss (nats per token)") -> Path:
    """One figure for the runs' metrics.jsonl: loss (training solid, validation dashed with
    markers, a text run's unigram baseline dotted), learning rate and window (when a run has
    one) by step. loss_label: what the loss is (a distillation stage's own). OSError for a run
    folder without metrics."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on servers and CI
    import matplotlib.pyplot as plt

    runs = []  # (label, folder, records)
    for run_dir in map(Path, run_dirs):
        records = read_records(run_dir / "metrics.jsonl")
        if not records:
            raise FileNotFoundError(f"{run_dir}: no metrics.jsonl with records (is it a run folder?)")
        label = run_dir.name if run_dir.name not in [run[0] for run in runs] else str(run_dir)
        runs.append((label, run_dir, records))
    windows = any(record.get("window") is not None for _, _, records in runs for record in records)
    panels = 3 if windows else 2
    figure, axes = plt.subplots(1, panels, figsize=(3.6 * panels + 1, 3.4))
    for index, (label, run_dir, records) in enumerate(runs):
        color = f"C{index}"
        train = [(r["step"], r["loss"]) for r in records if r.get("loss") is not None]
        valid = [(r["step"], r["eval_loss"]) for r in records if r.get("eval_loss") is not None]
        axes[0].plot(*zip(*train), color=color, linewidth=1, label=f"{label} training")
        if valid:
            axes[0].plot(*zip(*valid), "o--", color=color, markersize=4, label=f"{label} validation")
        baseline = unigram_baseline(run_dir)
        if baseline is not None:
            axes[0].axhline(baseline, color=color, linestyle=":", linewidth=1, label=f"{label} unigram baseline")
        rates = [(r["step"], r["lr"]) for r in records if r.get("lr") is not None]
        axes[1].plot(*zip(*rates), color=color, label=label)
        if windows:
            sizes = [(r["step"], r["window"]) for r in records if r.get("window") is not None]
            if sizes:
                axes[2].plot(*zip(*sizes), ".", color=color, markersize=3, label=label)
    axes[0].set(xlabel="step", ylabel=loss_label, title="loss")
    axes[1].set(xlabel="step", ylabel="learning rate", title="learning rate")
    if windows:
        axes[2].set(xlabel="step", ylabel="SWA window (tokens)", title="window (logged steps)")
    for axis in axes:
        axis.grid(True, alpha=0.3)
        axis.legend(fontsize=7)
    figure.suptitle(f"training curves: {', '.join(run[0] for run in runs)}", fontsize=10)
    figure.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def unigram_baseline(run_dir: str | Path) -> float | None:
    """A text run's unigram entropy (text-report.json), or None."""
    report = Path(run_dir) / "text-report.json"
    return json.loads(report.read_text()).get("unigram_entropy") if report.is_file() else None
