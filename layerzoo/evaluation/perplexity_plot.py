"""The perplexity-against-context-length figure: one line per run, as a PNG (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path


def plot_perplexity(results: dict[str, dict], path: str | Path, title: str = "") -> Path:
    """results: run label -> perplexity_by_length's dict (with "train_length" when known). Left:
    perplexity over the first L tokens against L; right: bits per byte by position bucket."""
    import matplotlib

    matplotlib.use("Agg")  # headless: no display on servers and CI
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.6))
    for index, (label, result) in enumerate(results.items()):
        color = f"C{index}"
        rows = [row for row in result["lengths"] if row["loss"] is not None]
        left.plot([row["length"] for row in rows], [row["perplexity"] for row in rows], "o-", color=color, label=label)
        buckets = [row for row in result["buckets"] if row["bits_per_byte"] is not None]
        right.plot([(row["first"] + row["last"]) / 2 + 1 for row in buckets], [row["bits_per_byte"] for row in buckets],
                   ".-", color=color, label=label)
        if result.get("train_length"):
            for axes in (left, right):
                axes.axvline(result["train_length"], color=color, linestyle=":", linewidth=1)
    lengths = sorted({row["length"] for result in results.values() for row in result["lengths"]})
    left.set_xscale("log", base=2)
    left.set_xticks(lengths, [str(length) for length in lengths])
    left.minorticks_off()
    left.set(xlabel="context length L (tokens)", ylabel="perplexity over the first L tokens",
             title="perplexity at each context length")
    right.set(xscale="log", xlabel="position in the document (tokens)", ylabel="bits per byte",
              title="loss by position (bits per UTF-8 byte)")
    for axes in (left, right):
        axes.grid(True, which="both", alpha=0.3)
        axes.legend(fontsize=8, title="run (dotted: training length)", title_fontsize=7)
    if title:
        figure.suptitle(title, fontsize=10)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=100)
    plt.close(figure)
    return path
