"""ARMT against its base model run on the whole input: time per segment and peak memory, no grad.

    python -m benchmarks armt                               # armt-tiny in 128-token segments, CPU
    python -m benchmarks armt --segments 8 32 --set armt.segment_size=64 --set model.d_model=128

Input: token ids (B, segments x segment_size), B=1. ARMT reads them segment by segment, carrying
only its memory (and dropping each segment's logits once computed, as a long-context reader
would), so its time per segment and its memory should stay flat as the input grows; the base
model (the same stack without memory) attends over the whole input at once. Each cell is one
whole forward, timed in interleaved rounds (runner/timing.py). Peak memory: the rise of the peak
over one forward beyond a one-segment warm-up (what an input longer than one segment costs on
top), in a fresh process per cell on CPU (runner/memory.py).
"""

from __future__ import annotations

import argparse

import torch

import layerzoo

from .runner.arguments import add_device, add_memory_switch, add_spec, positive_int
from .runner.memory import can_measure
from .runner.registry import Benchmark
from .runner.summary import SummaryRow
from .runner.results import value
from .runner.tables import faster, markdown_table, mib, ratio
from .runner.timing import Cell, time_cells

METHODS = ("armt", "base")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec(parser, "armt-tiny", ("armt.segment_size=128",))
    parser.add_argument("--segments", type=positive_int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--batch", type=positive_int, default=1)
    add_device(parser)
    add_memory_switch(parser, default=True)
    parser.set_defaults(reps=3, budget=20.0)


def build(args: argparse.Namespace):
    torch.manual_seed(0)
    return layerzoo.build(args.spec, args.overrides, device=args.device).eval()


def token_ids(args: argparse.Namespace, model, segments: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    shape = (args.batch, segments * model.segment_size)
    return torch.randint(0, model.config.vocab_size, shape, generator=generator).to(args.device)


@torch.no_grad()
def forward(model, method: str, ids: torch.Tensor) -> None:
    if method == "base":
        model.base(ids)
        return
    state = None
    for segment in ids.split(model.segment_size, dim=1):
        _, state = model(segment, state=state, return_state=True)


def run(args: argparse.Namespace) -> dict:
    model = build(args)
    cells = [Cell({"segments": segments, "method": method}, lambda method=method, ids=token_ids(args, model, segments):
                  forward(model, method, ids)) for segments in args.segments for method in METHODS]
    warmups = [lambda method=method: forward(model, method, token_ids(args, model, 1)) for method in METHODS]
    config = model.armt_config
    return {"rows": time_cells(cells, rounds=args.reps, budget=args.budget, device=args.device, warmups=warmups),
            "model": {"d_model": model.backbone.d_model, "layers": len(model.backbone.layers),
                      "segment_size": config.segment_size, "memory_tokens": config.num_mem_tokens,
                      "memory_layers": list(model.memory_layers)}}


def memory_cells(args: argparse.Namespace) -> list[dict]:
    if not (args.memory and can_measure(args.device)):
        return []
    return [{"segments": segments, "method": method} for segments in args.segments for method in METHODS]


def memory_probe(args: argparse.Namespace, labels: dict):
    """One forward of the cell, after a one-segment one: that warm-up pays one-off costs (thread
    pools, kernels) and maps one segment's working set, so what is left is what more a longer
    input needs."""
    model = build(args)
    ids = token_ids(args, model, labels["segments"])
    forward(model, labels["method"], token_ids(args, model, 1))
    return lambda: forward(model, labels["method"], ids)


def per_segment_ms(rows: list[dict], segments: int, method: str) -> float | None:
    seconds = value(rows, "seconds", segments=segments, method=method)
    return None if seconds is None else seconds * 1e3 / segments


def render(data: dict) -> str:
    config, rows, model = data["config"], data["rows"], data["model"]
    memory = any("peak_bytes" in row for row in rows)
    head = ["segments", "tokens", "ARMT ms/segment", "base ms/segment", "time ratio base/ARMT"]
    head += ["ARMT peak MiB", "base peak MiB"] if memory else []
    table = []
    for segments in config["segments"]:
        armt, base = (per_segment_ms(rows, segments, method) for method in METHODS)
        cells = [str(segments), str(segments * model["segment_size"]), f"{armt:.1f}", f"{base:.1f}", ratio(base, armt)]
        if memory:
            cells += [mib(value(rows, "peak_bytes", segments=segments, method=m)) for m in METHODS]
        table.append(cells)
    caption = (f"{config['spec']} {' '.join(config['overrides'])}: d_model {model['d_model']}, {model['layers']} layers, "
               f"segment {model['segment_size']}, {model['memory_tokens']} memory tokens, memory layers "
               f"{model['memory_layers']}; batch {config['batch']}, {config['device']}, no grad, best of "
               f"{config['reps']} interleaved rounds. ARMT: segment by segment with the memory carried; base: the same "
               "stack on the whole input at once")
    return f"{caption}\n\n{markdown_table(head, table)}"


def summary(data: dict) -> list[SummaryRow]:
    """ARMT at the most segments against its base model: time per segment and peak memory."""
    config, rows = data["config"], data["rows"]
    segments = max(config["segments"])
    armt, base = (per_segment_ms(rows, segments, method) for method in METHODS)
    peaks = [value(rows, "peak_bytes", segments=segments, method=method) for method in METHODS]
    memory = None not in peaks
    ours = f"{armt:.1f} ms / segment" + (f", {mib(peaks[0])} MiB peak" if memory else "")
    peer = f"{base:.1f} ms / segment" + (f", {mib(peaks[1])} MiB peak" if memory else "")
    versus = faster(armt, base) + (f", {faster(max(peaks[0], 1), max(peaks[1], 1), 'less memory', 'more memory')}"
                                   if memory else "")
    tokens = segments * data["model"]["segment_size"]
    return [SummaryRow(f"ARMT inference, {segments} segments of {data['model']['segment_size']} tokens",
                       f"{config['spec']}, {tokens:,} tokens", ours, "its base model on the whole input", peer, versus)]


BENCHMARK = Benchmark(
    name="armt", description="ARMT segment by segment against its base model on the whole input: time and peak memory",
    add_arguments=add_arguments, run=run, render=render, summary=summary, memory_cells=memory_cells,
    memory_probe=memory_probe, smoke={"segments": [2], "overrides": ["armt.segment_size=16"]},
)
