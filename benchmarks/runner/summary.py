"""The README's summary table: each kernel against its best peer, one row per kernel and mode."""

from __future__ import annotations

from typing import NamedTuple

from .tables import faster, ms

HEAD = ["kernel", "shape", "ours", "best peer", "peer's result", "ours vs peer", "ours, share of matmul rate"]


class SummaryRow(NamedTuple):
    """One row of the summary, every cell formatted."""

    kernel: str
    shape: str
    ours: str
    peer: str
    peer_result: str
    ours_vs_peer: str
    share_of_matmul: str = ""


def against_best_peer(kernel: str, shape: str, ours: float | None, peers: dict[str, float | None], share: str = "",
                      digits: int = 1) -> list[SummaryRow]:
    """[the row of ours (seconds) against the fastest of peers ({description: seconds, None where
    not timed})], or [] where ours was not timed."""
    if ours is None:
        return []
    timed = {name: seconds for name, seconds in peers.items() if seconds is not None}
    if not timed:
        return [SummaryRow(kernel, shape, f"{ms(ours, digits)} ms", "none measured", "-", "-", share)]
    best = min(timed, key=timed.get)
    return [SummaryRow(kernel, shape, f"{ms(ours, digits)} ms", best, f"{ms(timed[best], digits)} ms",
                       faster(ours, timed[best]), share)]
