"""The NIAH heatmap: context length x needle depth -> accuracy, as a PNG (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path


def plot_heatmap(grid: dict, path: str | Path, title: str = "", train_length: int | None = None) -> Path:
    """Write `grid` (from evaluate_grid) as a heatmap PNG; a dashed line marks the training length."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on servers and CI
    import matplotlib.pyplot as plt

    lengths, depths = grid["lengths"], grid["depths"]
    accuracy = [[100 * a for a in row] for row in grid["accuracy"]]
    figure, axes = plt.subplots(figsize=(1.2 + 0.9 * len(lengths), 1.2 + 0.6 * len(depths)))
    image = axes.imshow(accuracy, cmap="RdYlGn", vmin=0, vmax=100, aspect="auto")
    for i, row in enumerate(accuracy):
        for j, value in enumerate(row):
            axes.text(j, i, f"{value:.0f}", ha="center", va="center", fontsize=8)
    axes.set_xticks(range(len(lengths)), [str(length) for length in lengths])
    axes.set_yticks(range(len(depths)), ["-" if d is None else f"{d:.2f}" for d in depths])
    axes.set_xlabel("context length (tokens)")
    axes.set_ylabel("needle depth")
    if train_length is not None:
        beyond = [j for j, length in enumerate(lengths) if length > train_length]
        if beyond and beyond[0] > 0:
            axes.axvline(beyond[0] - 0.5, color="black", linestyle="--", linewidth=1)
    window = f" (test window {grid['window']})" if grid.get("window") else ""
    axes.set_title(f"{title}{window}", fontsize=9)
    figure.colorbar(image, ax=axes, label="accuracy (%)")
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
