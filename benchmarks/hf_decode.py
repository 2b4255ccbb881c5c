"""Decoding through transformers' generate() against layerzoo's own: time per token and state per sequence against context length.

    python -m benchmarks hf_decode                        # swax, swax-gdn, swa-full, transformer at 1k, 4k, 16k, 64k
    python -m benchmarks hf_decode --specs swax --lengths 1024 4096 --plot decode.png

Every spec is built at d_model 256, 8 layers, vocab 32000 and 4 attention heads (spec overrides,
SPECS below), fp32, batch 1, no grad, one thread (--threads). At each context length L the
prompt's first L - 1 tokens are read once, in pieces of --chunk tokens (the prefill row:
seconds, one run, and the bytes of the mixer states it leaves); both loops then continue from
that state, greedily: layerzoo's generate(state=...) and transformers' generate with a
LayerzooCache holding it (its prefix caching: the last prompt token is read there). Time per
token is the difference between generating --tokens + 2 and 2 tokens, over --tokens: what each
further token costs, the first step and the prompt's handling cancelling. Every spec's and
length's cells are timed in one set of interleaved rounds.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path

import torch

from layerzoo.mixers.states import zip_states

from .runner.arguments import positive_int
from .runner.registry import Benchmark
from .runner.results import value
from .runner.tables import markdown_table, mib
from .runner.timing import Cell, time_cells

SIZE = ["model.d_model=256", "model.n_layers=8", "model.vocab_size=32000"]
SPECS = {
    "swax": ["model.mixers.swa.n_heads=4"],
    "swax-gdn": ["model.mixers.swa.n_heads=4", "model.mixers.gated_deltanet.n_heads=4",
                 "model.mixers.gated_deltanet.head_dim=64"],
    "swa-full": ["model.mixers.swa.n_heads=4", "model.mixers.attention.n_heads=4"],
    "transformer": ["model.mixers.attention.n_heads=4"],
}
FIRST = 2  # tokens both timed calls generate; the difference is --tokens more
LOOPS = ("layerzoo", "hf")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--specs", nargs="+", default=list(SPECS), choices=list(SPECS))
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=[1024, 4096, 16384, 65536],
                        help="context lengths")
    parser.add_argument("--tokens", type=positive_int, default=32, help="decoded tokens timed per call")
    parser.add_argument("--chunk", type=positive_int, default=2048, help="prefill piece length")
    parser.add_argument("--plot", type=Path, help="also draw time and state against context length into this PNG")
    # One sequence's decoding step is small ops: on a shared machine a second thread mostly waits.
    parser.set_defaults(reps=3, budget=30.0, threads=1)


def unavailable(args: argparse.Namespace) -> str | None:
    return None if importlib.util.find_spec("transformers") else "needs transformers (pip install 'layerzoo[hf]')"


def build(name: str):
    from layerzoo.hf import LayerzooForCausalLM

    torch.manual_seed(0)
    return LayerzooForCausalLM.from_spec(name, SIZE + SPECS[name]).eval()


@torch.no_grad()
def prefill(model, prompt: torch.Tensor, chunk: int) -> list:
    """The states after the prompt's tokens (1, L), read `chunk` at a time."""
    state = None
    for piece in prompt.split(chunk, dim=1):
        _, state = model.model(piece, state, return_state=True, logits_to_keep=1)
    return state


def state_bytes(state: list) -> int:
    sizes: list[int] = []
    zip_states(lambda parts: sizes.append(parts[0].numel() * parts[0].element_size()), [state])
    return sum(sizes)


def decoders(model, prompt: torch.Tensor, state: list, tokens: int) -> dict:
    """{(loop, new tokens): fn} generating FIRST and FIRST + tokens tokens after `prompt` (1, L),
    whose first L - 1 tokens `state` holds."""
    from layerzoo.hf import LayerzooCache

    def layerzoo_loop(n: int):
        return lambda: model.model.generate(prompt[:, -1:], n, state=state)

    def hf_loop(n: int):
        # a fresh cache per call: generate replaces its states (the state tensors are never written)
        return lambda: model.generate(prompt, cache=LayerzooCache(state, columns=prompt.shape[1] - 1),
                                      max_new_tokens=n, do_sample=False, pad_token_id=0)

    return {(loop, n): make(n) for loop, make in zip(LOOPS, (layerzoo_loop, hf_loop)) for n in (FIRST, FIRST + tokens)}


def run(args: argparse.Namespace) -> dict:
    cells, prefills = [], []
    for name in args.specs:
        model = build(name)
        for length in args.lengths:
            prompt = torch.randint(0, 32000, (1, length), generator=torch.Generator().manual_seed(length))
            start = time.perf_counter()
            state = prefill(model, prompt[:, :-1], args.chunk)
            seconds = time.perf_counter() - start
            loops = decoders(model, prompt, state, args.tokens)
            # Both loops decode the same tokens (their first calls also warm them up).
            longest = FIRST + args.tokens
            same = loops["hf", longest]()
            assert torch.equal(same, torch.cat((prompt[:, :-1], loops["layerzoo", longest]()), 1)), name
            with torch.no_grad():
                _, after = model.model(prompt[:, -1:], state, return_state=True)
            prefills.append({"cell": {"spec": name, "context": length, "method": "prefill"}, "seconds": seconds,
                             "state_bytes": state_bytes(after)})
            cells += [Cell({"spec": name, "context": length, "method": loop, "tokens": n}, fn)
                      for (loop, n), fn in loops.items()]
    rows = prefills + time_cells(cells, rounds=args.reps, budget=args.budget)
    if args.plot:
        plot(table_rows({"config": vars(args), "rows": rows}), args.plot)
    return {"rows": rows}


def table_rows(data: dict) -> list[dict]:
    """Per spec and context: state bytes, prefill seconds and each loop's ms per further token."""
    config, rows = data["config"], data["rows"]
    result = []
    for name in config["specs"]:
        for length in config["lengths"]:
            def seconds(method, tokens):
                return value(rows, "seconds", spec=name, context=length, method=method, tokens=tokens)

            per_token = {loop: (seconds(loop, FIRST + config["tokens"]) - seconds(loop, FIRST)) / config["tokens"] * 1e3
                         for loop in LOOPS}
            result.append({"spec": name, "context": length, "prefill_s": value(rows, "seconds", spec=name, context=length,
                                                                              method="prefill"),
                           "state_bytes": value(rows, "state_bytes", spec=name, context=length, method="prefill"),
                           **{f"{loop}_ms": ms for loop, ms in per_token.items()}})
    return result


def render(data: dict) -> str:
    config = data["config"]
    head = ["spec", "context", "state MiB / sequence", "prefill s", "layerzoo ms / token", "HF ms / token", "HF / layerzoo"]
    table = [[row["spec"], f"{row['context']:,}", mib(row["state_bytes"], 2), f"{row['prefill_s']:.1f}",
              f"{row['layerzoo_ms']:.2f}", f"{row['hf_ms']:.2f}", f"{row['hf_ms'] / row['layerzoo_ms']:.2f}x"]
             for row in table_rows(data)]
    caption = (f"{', '.join(config['specs'])} at {' '.join(SIZE)}, 4 attention heads; fp32, batch 1, greedy; "
               f"{config['tokens']} tokens timed per cell, best of {config['reps']} interleaved rounds")
    return f"{caption}\n\n{markdown_table(head, table)}"


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (time_axis, memory_axis) = plt.subplots(1, 2, figsize=(10, 4))
    for spec in dict.fromkeys(row["spec"] for row in rows):
        mine = [row for row in rows if row["spec"] == spec]
        contexts = [row["context"] for row in mine]
        line, = time_axis.plot(contexts, [row["hf_ms"] for row in mine], marker="o", label=f"{spec} (HF)")
        time_axis.plot(contexts, [row["layerzoo_ms"] for row in mine], marker="x", linestyle="--", color=line.get_color(),
                       label=f"{spec} (layerzoo)")
        memory_axis.plot(contexts, [row["state_bytes"] / 2**20 for row in mine], marker="o", label=spec)
    for axis, label in ((time_axis, "ms per decoded token"), (memory_axis, "state MiB per sequence")):
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_xlabel("context length (tokens)")
        axis.set_ylabel(label)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=100)


BENCHMARK = Benchmark(
    name="hf_decode", description="Decoding through transformers' generate against layerzoo's: ms per token, state size",
    add_arguments=add_arguments, run=run, render=render, unavailable=unavailable, packages=("transformers",),
    smoke={"specs": ["swax"], "lengths": [16], "tokens": 2, "chunk": 8},
)
