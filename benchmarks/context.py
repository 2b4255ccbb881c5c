"""Context parallelism: peak memory per rank and tokens/s of a forward + backward against sequence
length, for K = 1, 2 and 4 gloo processes sharing one row (one sequence, or two packed 5:1), a
contiguous piece each.

    python -m benchmarks context                                 # every model, 1k-4k tokens
    python -m benchmarks context --seq-lens 2048 8192 --ks 1 2

Each cell is a fresh torchrun launch of K processes, one thread each (runner/context_worker.py):
one row (batch 1), cross-entropy, backward, no optimizer step. Peak memory: the largest rise
of a rank's peak resident set over one step, after a short warm-up step (the gradients and one-off
costs are paid there), so what is left grows with the sequence: activations, and each mixer's
exchange. tokens/s: the whole sequence over the best step of the group's slowest rank. The models
take turns at each length and K, so full attention with and without balancing run side by side.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

from .runner.arguments import positive_int
from .runner.memory import ROOT
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table, mib, ratio

WIDER = ["model.d_model=128"]
# Two sequences of 5:1 packed in the row: at K = 2 the contiguous pieces leave rank 1 1.29x the
# average causal work, a packed row uneven but under where full attention balances (UNEVEN), to
# measure balancing where it is forced there.
FIVE_TO_ONE = (5, 1)
# row name: (label, spec, overrides, full attention's work balanced over the ranks, the packed
# sequences' relative lengths or None for one sequence)
MODELS = {
    "swax-tiny": ("SWA + mLSTM", "swax-tiny", WIDER + ["model.mixers.swa.window=64", "model.mixers.mlstm.chunk_size=64"],
                  False, None),
    "swax-gdn-tiny": ("SWA + Gated DeltaNet", "swax-gdn-tiny", WIDER + ["model.mixers.swa.window=64"], False, None),
    "transformer-tiny": ("full attention", "transformer-tiny", WIDER, False, None),
    "transformer-balanced": ("full attention, balanced", "transformer-tiny", WIDER, True, None),
    "transformer-packed": ("full attention, packed 5:1", "transformer-tiny", WIDER, False, FIVE_TO_ONE),
    "transformer-packed-balanced": ("full attention, packed 5:1, balanced", "transformer-tiny", WIDER, True,
                                    FIVE_TO_ONE),
}
# (contiguous, balanced, what they run): the pairs the second table sets against each other
BALANCING = [("transformer-tiny", "transformer-balanced", "one sequence"),
             ("transformer-packed", "transformer-packed-balanced", "packed 5:1")]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--seq-lens", type=positive_int, nargs="+", default=[1024, 2048, 4096])
    parser.add_argument("--ks", type=positive_int, nargs="+", default=[1, 2, 4], help="context sizes (processes)")
    parser.set_defaults(reps=2)


def cell(name: str, length: int, k: int, reps: int) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    _, spec, overrides, balanced, packed = MODELS[name]
    documents = "-" if packed is None else ",".join(map(str, packed))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(k),
               "-m", "benchmarks.runner.context_worker", spec, str(length), str(reps), str(int(balanced)), documents,
               *overrides]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(f"context cell {name} T={length} K={k} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args: argparse.Namespace) -> dict:
    rows = []
    for length in args.seq_lens:
        for k in args.ks:
            for spec in args.models:
                measured = cell(spec, length, k, args.reps)
                rows.append({"cell": {"model": spec, "seq_len": length, "k": k}, **measured})
    return {"rows": rows, "cpus": os.cpu_count()}


def render(data: dict) -> str:
    config, rows = data["config"], data["rows"]
    ks = config["ks"]
    head = ["model", "tokens", *(f"K={k} MiB/rank" for k in ks), *(f"K={k} tok/s" for k in ks)]
    head += [f"MiB K=1 / K={max(ks)}"] if 1 in ks and max(ks) > 1 else []
    table = []
    for spec in config["models"]:
        for length in config["seq_lens"]:
            peaks = [value(rows, "peak_bytes", model=spec, seq_len=length, k=k) for k in ks]
            speeds = [length / value(rows, "seconds", model=spec, seq_len=length, k=k) for k in ks]
            cells = [MODELS[spec][0], str(length), *(mib(peak) for peak in peaks), *(f"{s:,.0f}" for s in speeds)]
            if 1 in ks and max(ks) > 1:
                cells.append(ratio(peaks[ks.index(1)], peaks[-1]))
            table.append(cells)
    caption = (f"d_model 128, 4 layers (windows and chunks 64), fp32, batch 1, forward + backward; K gloo processes of "
               f"one thread each on a {data['cpus']}-core machine (K above {data['cpus']} oversubscribes it: no "
               f"speed-up to expect there; peak memory per rank is the measure); best of {config['reps']} steps")
    return f"{caption}\n\n{markdown_table(head, table)}{balancing(data)}"


def balancing(data: dict) -> str:
    """Full attention balanced against its contiguous pieces, per layout, length and K > 1: the
    ratios of tokens/s and of peak memory per rank ("" unless the run measured a pair)."""
    config, rows = data["config"], data["rows"]
    pairs = [pair for pair in BALANCING if set(pair[:2]) <= set(config["models"])]
    if not pairs:
        return ""
    ks = [k for k in config["ks"] if k > 1]
    head = ["sequences", "tokens", *(f"K={k} tok/s" for k in ks), *(f"K={k} MiB/rank" for k in ks)]
    table = []
    for contiguous, balanced, layout in pairs:
        for length in config["seq_lens"]:
            seconds = [(value(rows, "seconds", model=contiguous, seq_len=length, k=k),
                        value(rows, "seconds", model=balanced, seq_len=length, k=k)) for k in ks]
            peaks = [(value(rows, "peak_bytes", model=balanced, seq_len=length, k=k),
                      value(rows, "peak_bytes", model=contiguous, seq_len=length, k=k)) for k in ks]
            table.append([layout, str(length), *(ratio(*pair, 2) for pair in seconds),
                          *(ratio(*pair, 2) for pair in peaks)])
    return ("\n\nFull attention balanced over the ranks against contiguous pieces, same run (above 1x: balanced "
            f"is faster, or holds more):\n\n{markdown_table(head, table)}")


BENCHMARK = Benchmark(
    name="context", description="Context parallelism: peak memory per rank and tokens/s against length for K = 1, 2, 4",
    add_arguments=add_arguments, run=run, render=render,
    smoke={"models": ["swax-gdn-tiny", "transformer-packed-balanced"], "seq_lens": [128], "ks": [1, 2]},
)
