"""The comparison figure: each group's metric against context length (mean line, min-max band
over its seeds) beside its training loss against the step, as a PNG (matplotlib, Agg)."""

from __future__ import annotations

import math
from pathlib import Path

LABELS = {"niah": "accuracy (%), mean over needle depths", "perplexity": "perplexity over the first L tokens"}
TITLES = {"niah": "accuracy against context length", "perplexity": "perplexity against context length"}


def plot_comparison(comparison: dict, path: str | Path) -> Path:
    """comparison: compare()'s dict. Left (not for metric loss): the metric against context
    length, a dotted line at each group's training length; right: training loss against step."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on servers and CI
    import matplotlib.pyplot as plt

    metric, groups = comparison["metric"], comparison["groups"]
    panels = 1 if metric == "loss" else 2
    # One legend under the panels, two labels a row: labels of sweep points are long, and a
    # legend inside a panel would hide the curves.
    legend_inches = 0.35 + 0.2 * math.ceil(len(groups) / 2)
    height = 3.6 + legend_inches
    figure, axes = plt.subplots(1, panels, figsize=(4.6 * panels + 1, height), squeeze=False)
    axes = axes[0]
    for index, group in enumerate(groups):
        color = f"C{index}"
        if metric != "loss":
            draw_band(axes[0], group["curve"], color, group["label"], 100 if metric == "niah" else 1)
            axes[0].axvline(group["train_length"], color=color, linestyle=":", linewidth=1)
        draw_band(axes[-1], group["loss_curve"], color, group["label"])
    if metric != "loss":
        lengths = sorted({x for group in groups for x in group["curve"]["x"]})
        axes[0].set_xscale("log", base=2)
        axes[0].set_xticks(lengths, [str(length) for length in lengths])
        axes[0].minorticks_off()
        axes[0].set(xlabel="context length (tokens)", ylabel=LABELS[metric],
                    title=f"{TITLES[metric]} (dotted: training length)")
    axes[-1].set(xlabel="step", ylabel="training loss (nats per token)", title="training loss")
    for axis in axes:
        axis.grid(True, alpha=0.3)
    handles, labels = axes[-1].get_legend_handles_labels()
    figure.legend(handles, labels, loc="lower center", ncol=2, fontsize=7, frameon=False,
                  title="mean, band: min-max over seeds", title_fontsize=7)
    figure.tight_layout(rect=(0, legend_inches / height, 1, 1))
    path = Path(path)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path


def draw_band(axis, band: dict, color: str, label: str, scale: float = 1) -> None:
    """A mean line with markers and the min-max band around it; x without a value is left out."""
    points = [(x, *(scale * band[key][i] for key in ("mean", "min", "max")))
              for i, x in enumerate(band["x"]) if band["mean"][i] is not None]
    if not points:
        return
    x, mean, low, high = zip(*points)
    axis.plot(x, mean, ".-", color=color, label=label, markersize=4)
    axis.fill_between(x, low, high, color=color, alpha=0.2, linewidth=0)
