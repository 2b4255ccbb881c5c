"""Training steps with and without `training.compile`: one spec's steps, eager against torch.compile.

    python -m benchmarks compiled_training                  # swax-tiny, its training section
    python -m benchmarks compiled_training --spec swax-gdn-tiny --reps 9

Two copies of the spec's model start from the same weights; one has its blocks compiled in place
as `layerzoo train --compile` does (the trainer's compile_blocks, with --compile-backend: inductor
by default). Each cell is one whole training step of the trainer (forward, backward, clipping,
AdamW) on the spec's own batches (batch_size x seq_len tokens) at one of its training windows.
The first compiled step of each window compiles its shapes; it is timed once, before the rounds,
as a row of its own ("first_step"), since a run pays it once.
"""

from __future__ import annotations

import argparse
import copy

from layerzoo.assemblies import build
from layerzoo.mixers import set_window
from layerzoo.specs import load_spec
from layerzoo.tasks import make_task
from layerzoo.training.loop.loop import adamw, optimizer_step
from layerzoo.training.loop.trainer import autocast_context
from layerzoo.training.objectives.language_model import LanguageModel
from layerzoo.training.parallel import distributed

from .runner.arguments import add_spec
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table, ms, ratio
from .runner.timing import Cell, first_call_seconds, time_cells

FIRST_STEP = "first_step"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_spec(parser, "swax-tiny")
    parser.add_argument("--compile-backend", default="inductor",
                        help="torch.compile's backend (aot_eager skips code generation: a check, not a measurement)")
    parser.set_defaults(reps=7, budget=30.0)


def training_windows(config) -> list[int | None]:
    """The windows a run trains at: short and long of a stochastic schedule, else the one it keeps."""
    window = config.window
    return list(dict.fromkeys(w for w in (window.short, window.long) if w is not None)) or [None]


def compile_blocks(model, backend: str) -> None:
    """The trainer's compile_blocks with the backend chosen: each repeated block compiled in place."""
    for block in model.repeated_blocks():
        block.compile(backend=backend)


def step_cell(model, config, task, context, window):
    """One training step of `model` at `window` on the batches of step 0 (drawn once, outside the
    timing); returns the callable."""
    optimizer = adamw(model, config.optimizer)
    objective = LanguageModel(model, task, task, config, context, autocast_context(config, context))
    batches = objective.batches(0, config.seq_len)
    objective.batches = lambda step, seq_len: batches

    def run():
        if window is not None:
            set_window(model, window)
        optimizer_step(objective, optimizer, 0, config.seq_len, config.optimizer.grad_clip)
    return run


def run(args: argparse.Namespace) -> dict:
    spec = load_spec(args.spec, args.overrides)
    config, context = spec.training, distributed.setup()
    task = make_task(config.task.name, config.task.options, spec.model.vocab_size)
    task.prepare(progress=False)
    eager = build(spec)
    compiled = copy.deepcopy(eager)
    compile_blocks(compiled, args.compile_backend)
    cells, first_steps = [], []
    for window in training_windows(config):
        cells.append(Cell({"window": window, "method": "eager"}, step_cell(eager, config, task, context, window)))
        compiled_step = step_cell(compiled, config, task, context, window)
        cells.append(Cell({"window": window, "method": "compiled"}, compiled_step))
        first_steps.append({"cell": {"window": window, "method": "compiled", "mode": FIRST_STEP},
                            "seconds": first_call_seconds(compiled_step)})
    rows = time_cells(cells, rounds=args.reps, budget=args.budget)
    return {"rows": first_steps + rows, "tokens_per_step": config.batch_size * config.seq_len}


def render(data: dict) -> str:
    config, rows, tokens = data["config"], data["rows"], data["tokens_per_step"]
    table = []
    for window in dict.fromkeys(row["cell"]["window"] for row in rows if "window" in row["cell"]):
        eager, compiled = (value(rows, "seconds", window=window, method=method) for method in ("eager", "compiled"))
        first = value(rows, "seconds", window=window, method="compiled", mode=FIRST_STEP)
        table.append([str(window), ms(eager), ms(compiled), f"{tokens / eager:,.0f}", f"{tokens / compiled:,.0f}",
                      ratio(eager, compiled, 2), f"{first:.1f}"])
    caption = (f"{config['spec']} {' '.join(config['overrides'])}: {tokens} tokens a step, one training step per cell, "
               f"compiled with {config['compile_backend']}; best of {config['reps']} interleaved rounds")
    head = ["window", "eager step ms", "compiled step ms", "eager tok/s", "compiled tok/s", "speed-up",
            "first compiled step s"]
    return f"{caption}\n\n{markdown_table(head, table)}"


BENCHMARK = Benchmark(
    name="compiled_training", description="Training steps eager against training.compile (torch.compile block by block)",
    add_arguments=add_arguments, run=run, render=render,
    smoke={"overrides": ["training.batch_size=2", "training.seq_len=32"], "compile_backend": "aot_eager"},
)
