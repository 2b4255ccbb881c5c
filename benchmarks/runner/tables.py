"""Markdown tables and the number formats the benchmarks' tables share."""

from __future__ import annotations

import math
from collections.abc import Sequence

MISSING = "-"


def markdown_table(head: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A markdown table with every column right-aligned (they hold numbers)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def ms(seconds: float | None, digits: int = 1) -> str:
    return MISSING if seconds is None else f"{seconds * 1e3:.{digits}f}"


def ratio(numerator: float | None, denominator: float | None, digits: int = 1) -> str:
    """numerator / denominator as "2.3x"; MISSING where either is."""
    if numerator is None or denominator is None:
        return MISSING
    return f"{numerator / denominator:.{digits}f}x"


def faster(ours: float, peer: float, better: str = "faster", worse: str = "slower") -> str:
    """How ours compares with a peer's time (or, naming better and worse, its size): "3.1x faster",
    "1.4x slower"."""
    return f"{peer / ours:.1f}x {better}" if peer >= ours else f"{ours / peer:.1f}x {worse}"


def mib(size: float | None, digits: int = 1) -> str:
    return MISSING if size is None else f"{size / 2**20:.{digits}f}"


def rate_of_matmul(flops: float, seconds: float | None, matmul_gflops: float | None) -> str:
    """A kernel's GFLOP/s and, in brackets, its share of the run's fp32 matmul rate: "41.2 (63%)"."""
    if seconds is None:
        return MISSING
    share = share_of_matmul(flops, seconds, matmul_gflops)
    return f"{flops / seconds / 1e9:.1f}" + (f" ({share})" if share else "")


def share_of_matmul(flops: float, seconds: float, matmul_gflops: float | None) -> str:
    """flops in seconds as a share of the run's fp32 matmul rate: "63%" ("" where it was not timed)."""
    return "" if matmul_gflops is None else f"{flops / seconds / 1e9 / matmul_gflops:.0%}"


def scaling_exponent(sizes: Sequence[float], times: Sequence[float]) -> float | None:
    """Least-squares slope of log(time) against log(size): 1.0 is linear; None under two sizes."""
    if len(set(sizes)) < 2:
        return None
    points = [(math.log(x), math.log(y)) for x, y in zip(sizes, times)]
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / sum((x - mean_x) ** 2 for x, _ in points)
