"""Training steps with and without `training.compile`: one spec's steps, eager against torch.compile.

    python benchmarks/compiled_training.py                  # swax-tiny, its training section
    python benchmarks/compiled_training.py --spec swax-gdn-tiny --reps 9 --json compiled.json

Two copies of the spec's model start from the same weights; one is compiled in place as
`layerzoo train --compile` does (inductor, the default backend). Each cell is one whole training
step of the trainer (forward, backward, clipping, AdamW) on the spec's own batches at one of its
training windows; cells are interleaved, best of --reps rounds, after a warm-up that compiles
every shape. The compile time of each window's first step is printed, since a run pays it once.
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerzoo.assemblies import build  # noqa: E402
from layerzoo.mixers import set_window  # noqa: E402
from layerzoo.specs import load_spec  # noqa: E402
from layerzoo.tasks import make_task  # noqa: E402
from layerzoo.training import distributed  # noqa: E402
from layerzoo.training.loop.trainer import autocast_context, make_optimizer, step_batches, train_step  # noqa: E402

from common import interleaved_best_seconds, markdown_table  # noqa: E402


def training_windows(config) -> list[int | None]:
    """The windows a run trains at: short and long of a stochastic schedule, else the one it keeps."""
    window = config.window
    return list(dict.fromkeys(w for w in (window.short, window.long) if w is not None)) or [None]


def step_cell(model, config, task, context, window, step):
    """One training step of `model` at `window` on the batches of `step`; returns the callable."""
    optimizer = make_optimizer(model, config)
    autocast = autocast_context(config, context)
    batches = step_batches(task, config, step, config.seq_len, config.batch_size, context)

    def run():
        if window is not None:
            set_window(model, window)
        train_step(model, optimizer, batches, config, context, autocast)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", default="swax-tiny")
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of runs per cell before it stops repeating")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    spec = load_spec(args.spec)
    config, context = spec.training, distributed.setup()
    task = make_task(config.task.name, config.task.options, spec.model.vocab_size)
    task.prepare(progress=False)
    eager = build(spec)
    compiled = copy.deepcopy(eager)
    compiled.compile()
    cells, compile_seconds = {}, {}
    for window in training_windows(config):
        cells["eager", window] = step_cell(eager, config, task, context, window, step=0)
        cells["compiled", window] = step_cell(compiled, config, task, context, window, step=0)
        start = time.perf_counter()
        cells["compiled", window]()  # the first call compiles this window's shapes
        compile_seconds[window] = time.perf_counter() - start
        print(f"window {window}: first compiled step {compile_seconds[window]:.1f} s", file=sys.stderr)
    best = interleaved_best_seconds(cells, args.reps, args.budget, "cpu")

    tokens = config.batch_size * config.seq_len
    rows, records = [], []
    for window in training_windows(config):
        eager_s, compiled_s = best["eager", window], best["compiled", window]
        rows.append([str(window), f"{eager_s * 1e3:.1f}", f"{compiled_s * 1e3:.1f}", f"{tokens / eager_s:,.0f}",
                     f"{tokens / compiled_s:,.0f}", f"{eager_s / compiled_s:.2f}x", f"{compile_seconds[window]:.0f}"])
        records.append({"window": window, "eager_s": eager_s, "compiled_s": compiled_s,
                        "first_compiled_step_s": compile_seconds[window]})
    print(f"{args.spec}: batch {config.batch_size} x {config.seq_len} tokens, one training step per cell")
    print(markdown_table(["window", "eager step ms", "compiled step ms", "eager tok/s", "compiled tok/s",
                          "speed-up", "first compiled step s"], rows))
    if args.json:
        args.json.write_text(json.dumps({"spec": args.spec, "tokens_per_step": tokens, "results": records}, indent=2))


if __name__ == "__main__":
    main()
