"""Serving through vLLM against layerzoo's own generate: output tokens/s and peak memory of a hybrid
(SWA + Gated DeltaNet) and of the same-size transformer.

    python -m benchmarks vllm                  # in a venv with vLLM (docs/serving.md): 1k, 4k, 16k x 1, 8 sequences
    python -m benchmarks vllm --lengths 1024 --batches 1 --reps 1

Both models are hf_decode's builds (swax-gdn and transformer at d_model 256, 8 layers, vocab
32000, heads of 64: sizes vLLM's CPU attention takes), random, fp32, saved as Hugging Face folders
and served by one vLLM engine each, in this process (eager, no prefix caching, chunked prefill of
--chunk tokens). Each cell is B equal-length random prompts of L tokens answered greedily, all B
at once: by vLLM's LLM.generate, and by layerzoo's generate on the same model (prompt read in
--chunk pieces too). As in hf_decode, each cell runs twice, generating 2 and 2 + --tokens tokens
per sequence; B x --tokens over the difference is the output tokens/s of decoding alone, and the
first call's time is the prompt's (with two steps). Peak memory: how far a call raised the
process's peak resident set; vLLM's key/value cache is reserved when its engine starts
(--kv-space GiB each), so it is outside the rise and said beside it. Every cell of both models
and both loops in one set of interleaved rounds.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import tempfile
from pathlib import Path

import torch

from .hf_decode import SIZE, build
from .runner.arguments import positive_int
from .runner.memory import rss_rise_bytes
from .runner.registry import Benchmark
from .runner.results import find_row
from .runner.tables import MISSING, markdown_table, mib
from .runner.timing import Cell, time_cells

MODELS = ("swax-gdn", "transformer")  # hf_decode's specs: the hybrid and the same-size transformer
LOOPS = ("vllm", "layerzoo")
FIRST = 2  # tokens both timed calls generate per sequence; the difference is --tokens more


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=[1024, 4096, 16384],
                        help="prompt lengths (tokens)")
    parser.add_argument("--batches", type=positive_int, nargs="+", default=[1, 8], help="sequences answered at once")
    parser.add_argument("--tokens", type=positive_int, default=16, help="decoded tokens timed per sequence")
    parser.add_argument("--chunk", type=positive_int, default=2048, help="prefill chunk (tokens per step)")
    parser.add_argument("--kv-space", type=positive_int, default=4, help="GiB of key/value cache each engine reserves")
    parser.set_defaults(reps=2, budget=60.0, threads=2)


def unavailable(args: argparse.Namespace) -> str | None:
    return None if importlib.util.find_spec("vllm") else "needs vLLM, in a venv of its own (docs/serving.md)"


def environment(args: argparse.Namespace) -> dict[str, str]:
    """vLLM on a shared CPU machine, its engine in this process (so that the timing and the
    resident set cover it), no thread pinning, --kv-space GiB of cache."""
    return {"VLLM_CPU_KVCACHE_SPACE": str(args.kv_space), "VLLM_CPU_OMP_THREADS_BIND": "nobind",
            "VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_LOGGING_LEVEL": "WARNING"}


def engine(folder: Path, args: argparse.Namespace):
    from vllm import LLM

    return LLM(model=str(folder), skip_tokenizer_init=True, enforce_eager=True, dtype="float32",
               enable_prefix_caching=False, seed=0, max_model_len=max(args.lengths) + FIRST + args.tokens,
               max_num_seqs=max(args.batches), max_num_batched_tokens=args.chunk)


def prompts(batch: int, length: int) -> torch.Tensor:
    return torch.randint(0, 32000, (batch, length), generator=torch.Generator().manual_seed(length + batch))


def vllm_call(llm, ids: torch.Tensor, tokens: int):
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
    requests = [{"prompt_token_ids": row} for row in ids.tolist()]
    return lambda: llm.generate(requests, params, use_tqdm=False)


def layerzoo_call(model, ids: torch.Tensor, tokens: int, chunk: int):
    return lambda: model.model.generate(ids, tokens, prefill_chunk_size=chunk, stop_ids=())


def with_peak(fn, peaks: dict, key: tuple):
    """fn, also keeping the largest rise of the peak resident set its runs caused under peaks[key]."""
    def run():
        peaks[key] = max(peaks.get(key, 0), rss_rise_bytes(fn))
    return run


def run(args: argparse.Namespace) -> dict:
    cells, peaks, engines, warmups = [], {}, [], []
    with tempfile.TemporaryDirectory(prefix="layerzoo-vllm-") as scratch:
        for name in args.models:
            model = build(name)
            folder = Path(scratch) / name
            model.save_pretrained(folder)
            llm = engine(folder, args)
            engines.append(llm)
            # first calls build kernels and fill the engine's caches of shapes: untimed
            warmups += [vllm_call(llm, prompts(1, 16), FIRST), layerzoo_call(model, prompts(1, 16), FIRST, args.chunk)]
            for length in args.lengths:
                for batch in args.batches:
                    ids = prompts(batch, length)
                    for n in (FIRST, FIRST + args.tokens):
                        for loop, call in (("vllm", vllm_call(llm, ids, n)),
                                           ("layerzoo", layerzoo_call(model, ids, n, args.chunk))):
                            labels = {"model": name, "context": length, "batch": batch, "loop": loop, "tokens": n}
                            cells.append(Cell(labels, with_peak(call, peaks, tuple(labels.values()))))
        rows = time_cells(cells, rounds=args.reps, budget=args.budget, warmups=warmups)
        for row in rows:
            peak = peaks.get(tuple(row["cell"].values()))
            if peak is not None:
                row["peak_rise_bytes"] = peak
        for llm in engines:
            llm.llm_engine.engine_core.shutdown()
        engines.clear()
        gc.collect()
    return {"rows": rows}


class Readings:
    def __init__(self, data: dict):
        self.config, self.rows = data["config"], data["rows"]

    def row(self, **labels) -> dict:
        return find_row(self.rows, **labels) or {}

    def speed(self, loop: str, name: str, length: int, batch: int) -> float | None:
        """Output tokens/s of decoding alone: batch x --tokens over the difference of the two calls."""
        low, high = (self.row(model=name, context=length, batch=batch, loop=loop, tokens=n).get("seconds")
                     for n in (FIRST, FIRST + self.config["tokens"]))
        return None if low is None or high is None else batch * self.config["tokens"] / (high - low)


def render(data: dict) -> str:
    readings, config = Readings(data), data["config"]
    table = []
    for name in config["models"]:
        for length in config["lengths"]:
            for batch in config["batches"]:
                speeds = {loop: readings.speed(loop, name, length, batch) for loop in LOOPS}
                cells = []
                for loop in LOOPS:
                    row = readings.row(model=name, context=length, batch=batch, loop=loop, tokens=FIRST)
                    longest = readings.row(model=name, context=length, batch=batch, loop=loop,
                                           tokens=FIRST + config["tokens"])
                    cells += [MISSING if speeds[loop] is None else f"{speeds[loop]:.1f}",
                              MISSING if "seconds" not in row else f"{row['seconds']:.2f} s",
                              f"+{mib(longest.get('peak_rise_bytes'))} MiB"]
                ratio = (f"{speeds['vllm'] / speeds['layerzoo']:.2f}x"
                         if speeds["vllm"] and speeds["layerzoo"] else MISSING)
                table.append([name, f"{length:,}", str(batch), *cells, ratio])
    head = ["model", "prompt", "sequences",
            *[f"{loop} {what}" for loop in LOOPS for what in ("tok/s", "prompt + 2 tokens", "peak")], "vLLM / layerzoo"]
    caption = (f"{', '.join(config['models'])} at {' '.join(SIZE)}, heads of 64, random weights; fp32, greedy, "
               f"{config['threads']} thread{'s' if config['threads'] != 1 else ''}; decoding: {config['tokens']} tokens per sequence timed (output tokens/s "
               f"of all sequences together), prompts read in chunks of {config['chunk']:,}; best of {config['reps']} "
               f"interleaved rounds; peak: the rise of the process's resident set in a call, outside which vLLM "
               f"reserves {config['kv_space']} GiB of key/value cache per engine")
    return f"{caption}\n\n{markdown_table(head, table)}"


BENCHMARK = Benchmark(
    name="vllm", description="Serving through vLLM against layerzoo's generate: output tokens/s and memory",
    add_arguments=add_arguments, run=run, render=render, unavailable=unavailable, environment=environment,
    packages=("vllm", "vllm-cpu", "transformers"),  # vLLM's distribution is vllm-cpu on CPU
    smoke={"lengths": [64], "batches": [1, 2], "tokens": 2, "chunk": 32, "kv_space": 1},
)
