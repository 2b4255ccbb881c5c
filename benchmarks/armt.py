"""ARMT against its base model run on the whole input: time per segment and peak memory, no grad.

    python benchmarks/armt.py                               # armt-tiny in 128-token segments, CPU
    python benchmarks/armt.py --segments 8 32 --set model.d_model=128 --json armt.json

ARMT reads the input segment by segment, carrying only its memory (and dropping each segment's
logits once computed, as a long-context reader would), so its time per segment and its memory
should stay flat as the input grows; the base model attends over the whole input at once. Peak
memory is the rise of the peak resident set over one forward (Linux CPU, one fresh process per
cell: torch's CPU allocations are invisible to tracemalloc) or of torch.cuda.max_memory_allocated,
over a one-segment warm-up: what an input longer than one segment costs on top.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import layerzoo  # noqa: E402

from common import CLEAR_REFS, markdown_table, probe_in_subprocess, rss_rise_bytes, timed_runs  # noqa: E402

METHODS = ("armt", "base")


def build(args):
    torch.manual_seed(0)
    return layerzoo.build(args.spec, args.overrides, device=args.device).eval()


def inputs(args, model, n_segments: int) -> torch.Tensor:
    length = n_segments * model.segment_size
    generator = torch.Generator().manual_seed(0)
    return torch.randint(0, model.config.vocab_size, (args.batch, length), generator=generator).to(args.device)


@torch.no_grad()
def run(model, method: str, ids: torch.Tensor) -> None:
    if method == "base":
        model.base(ids)
        return
    state = None
    for segment in ids.split(model.segment_size, dim=1):
        _, state = model(segment, state=state, return_state=True)


def median_seconds(args, model, method: str, ids: torch.Tensor) -> float:
    times = timed_runs(lambda: run(model, method, ids), args.device, reps=args.reps, budget=args.budget,
                       warmup=1, min_runs=2)
    return statistics.median(times)


def probe_memory(args, method: str, n_segments: int) -> int:
    """Child side: bytes by which one forward raises the peak over a one-segment warm-up.

    The warm-up pays one-off costs (thread pools, kernels) and maps one segment's working set, so
    what is left is how much more a longer input needs.
    """
    model = build(args)
    ids = inputs(args, model, n_segments)
    run(model, method, inputs(args, model, 1))
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        run(model, method, ids)
        return torch.cuda.max_memory_allocated() - before
    return rss_rise_bytes(lambda: run(model, method, ids))


def markdown(rows: list[dict], memory: bool) -> str:
    head = ["segments", "tokens", "ARMT ms/segment", "base ms/segment", "time ratio base/ARMT"]
    if memory:
        head += ["ARMT peak MiB", "base peak MiB"]
    table = []
    for row in rows:
        cells = [str(row["segments"]), str(row["tokens"]), f"{row['armt']['ms_per_segment']:.1f}",
                 f"{row['base']['ms_per_segment']:.1f}", f"{row['base']['ms_per_segment'] / row['armt']['ms_per_segment']:.1f}x"]
        if memory:
            cells += [f"{row[m]['peak_bytes'] / 2**20:.1f}" for m in METHODS]
        table.append(cells)
    return markdown_table(head, table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", default="armt-tiny", help="an ARMT spec (shipped name or path)")
    parser.add_argument("--set", dest="overrides", action="append", default=None, metavar="KEY=VALUE",
                        help="spec overrides (default: armt.segment_size=128)")
    parser.add_argument("--segments", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--reps", type=int, default=3, help="timed runs per cell (median)")
    parser.add_argument("--budget", type=float, default=20.0, help="stop after 2 runs past this many seconds")
    parser.add_argument("--no-memory", dest="memory", action="store_false", help="skip the peak-memory processes")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--probe-memory", nargs=2, metavar=("METHOD", "SEGMENTS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.overrides is None:
        args.overrides = ["armt.segment_size=128"]

    if args.probe_memory:
        method, n_segments = args.probe_memory
        print(probe_memory(args, method, int(n_segments)))
        return
    memory = args.memory and (args.device.startswith("cuda") or CLEAR_REFS.exists())

    model = build(args)
    rows = []
    for n_segments in args.segments:
        ids = inputs(args, model, n_segments)
        row = {"segments": n_segments, "tokens": ids.shape[1]}
        for method in METHODS:
            row[method] = {"ms_per_segment": median_seconds(args, model, method, ids) * 1e3 / n_segments}
            if memory:
                row[method]["peak_bytes"] = probe_in_subprocess(__file__, method, n_segments)
        rows.append(row)
        print(f"{n_segments} segments done", file=sys.stderr, flush=True)

    config = model.armt_config
    print(f"{args.spec} {' '.join(args.overrides)}: d_model {model.backbone.d_model}, {len(model.backbone.layers)} layers, "
          f"segment {config.segment_size}, {config.num_mem_tokens} memory tokens, memory layers "
          f"{list(model.memory_layers)}; batch {args.batch}, {args.device}, {torch.get_num_threads()} threads, no grad")
    print("ARMT: segment by segment with the memory carried; base: the same stack on the whole input at once\n")
    print(markdown(rows, memory))
    if args.json:
        args.json.write_text(json.dumps({"config": vars(args) | {"json": None}, "torch": torch.__version__,
                                         "rows": rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
