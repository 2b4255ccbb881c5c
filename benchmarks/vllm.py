"""Serving through vLLM against layerzoo's own generate: output tokens/s and peak memory of a hybrid
(SWA + Gated DeltaNet) and of the same-size transformer.

    python -m benchmarks vllm                  # in a venv with vLLM (docs/serving.md): 1k, 4k, 16k x 1, 8 sequences
    python -m benchmarks vllm --lengths 1024 --batches 1 --reps 1

Both models are hf_decode's builds (swax-gdn and transformer at d_model 256, 8 layers, vocab
32000, heads of 64: sizes vLLM's CPU attention takes), random, fp32, saved as Hugging Face folders
and served by one vLLM engine each, in this process (eager, no prefix caching). Each cell is B
equal-length random prompts of L tokens answered greedily, all B at once, the prompt and the
decoding timed apart:
- vLLM: one LLM.generate of 1 + --tokens tokens per sequence; its own per-request timestamps give
  the prompt's time (until every sequence has its first token) and the decoding's (the --tokens
  steps after it). A step reads at most --chunk prompt tokens of each sequence (its budget is
  B x --chunk; a sequence alone takes all of it), so the B prompts advance together and every
  sequence decodes in the same steps.
- layerzoo: generate(prompts, 1) for the prompt, read --chunk tokens at a time for all B; and,
  from the state after the first L - 1 tokens (read once, untimed), generating 2 and 2 + --tokens
  tokens, whose difference is the decoding's time.
Peak memory: how far a call raised the process's peak resident set (the prompt's call; for vLLM
the whole call); vLLM's key/value cache is reserved when its engine starts (--kv-space GiB each),
so it is outside the rise and said beside it. Every cell of both models and both loops in one
set of interleaved rounds.
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import tempfile
from pathlib import Path

import torch

from .hf_decode import SIZE, build, prefill
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
               enable_prefix_caching=False, seed=0, max_model_len=max(args.lengths) + 1 + args.tokens,
               max_num_seqs=max(args.batches), max_num_batched_tokens=max(args.batches) * args.chunk,
               long_prefill_token_threshold=args.chunk, disable_log_stats=False)


def prompts(batch: int, length: int) -> torch.Tensor:
    return torch.randint(0, 32000, (batch, length), generator=torch.Generator().manual_seed(length + batch))


def vllm_call(llm, ids: torch.Tensor, tokens: int, phases: dict | None = None, key: tuple = ()):
    """One generate of `tokens` per sequence; with phases, keeps under phases[key] the shortest
    prompt and decoding seconds vLLM's timestamps give over its runs (and how far apart the
    sequences' first tokens came)."""
    from vllm import SamplingParams

    params = SamplingParams(temperature=0.0, max_tokens=tokens, ignore_eos=True)
    requests = [{"prompt_token_ids": row} for row in ids.tolist()]

    def run():
        stats = [output.metrics for output in llm.generate(requests, params, use_tqdm=False)]
        if phases is not None:
            first = max(s.first_token_ts for s in stats)
            measured = {"prompt": first - min(s.scheduled_ts for s in stats),
                        "decode": max(s.last_token_ts for s in stats) - first,
                        # 0 when the prompts advance together, as the engine's settings ask
                        "first_token_spread": first - min(s.first_token_ts for s in stats)}
            best = phases.setdefault(key, measured)
            phases[key] = {phase: min(best[phase], seconds) for phase, seconds in measured.items()}
    return run


def with_peak(fn, peaks: dict, key: tuple):
    """fn, also keeping the largest rise of the peak resident set its runs caused under peaks[key]."""
    def run():
        peaks[key] = max(peaks.get(key, 0), rss_rise_bytes(fn))
    return run


def layerzoo_cells(model, ids: torch.Tensor, args: argparse.Namespace, labels: dict, peaks: dict) -> list[Cell]:
    """The prompt (generate(ids, 1)) and decoding from the state after ids[:, :-1] (2 and 2 + --tokens tokens)."""
    state = prefill(model, ids[:, :-1], args.chunk)
    cells = []
    for phase, call in (("prompt", lambda: model.model.generate(ids, 1, prefill_chunk_size=args.chunk, stop_ids=())),
                        *((n, functools.partial(model.model.generate, ids[:, -1:], n, state=state, stop_ids=()))
                          for n in (FIRST, FIRST + args.tokens))):
        here = {**labels, "loop": "layerzoo", "phase": phase}
        cells.append(Cell(here, with_peak(call, peaks, tuple(here.values()))))
    return cells


def run(args: argparse.Namespace) -> dict:
    cells, peaks, phases, engines, warmups = [], {}, {}, [], []
    with tempfile.TemporaryDirectory(prefix="layerzoo-vllm-") as scratch:
        for name in args.models:
            model = build(name)
            folder = Path(scratch) / name
            model.save_pretrained(folder)
            llm = engine(folder, args)
            engines.append(llm)
            # first calls build kernels and fill the engine's caches of shapes: untimed
            warmups += [vllm_call(llm, prompts(1, 16), FIRST),
                        lambda model=model: model.model.generate(prompts(1, 16), FIRST, stop_ids=())]
            for length in args.lengths:
                for batch in args.batches:
                    ids = prompts(batch, length)
                    labels = {"model": name, "context": length, "batch": batch}
                    here = {**labels, "loop": "vllm", "phase": "call"}
                    key = tuple(here.values())
                    cells.append(Cell(here, with_peak(vllm_call(llm, ids, 1 + args.tokens, phases, key), peaks, key)))
                    cells += layerzoo_cells(model, ids, args, labels, peaks)
        rows = time_cells(cells, rounds=args.reps, budget=args.budget, warmups=warmups)
        for row in rows:
            key = tuple(row["cell"].values())
            if key in peaks:
                row["peak_rise_bytes"] = peaks[key]
            row.update({f"{phase}_seconds": seconds for phase, seconds in phases.get(key, {}).items()})
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

    def phases(self, loop: str, name: str, length: int, batch: int) -> tuple[float | None, float | None, int | None]:
        """(prompt seconds, decoding output tokens/s of all sequences together, peak rise bytes)."""
        labels = {"model": name, "context": length, "batch": batch, "loop": loop}
        if loop == "vllm":
            row = self.row(**labels, phase="call")
            decode = row.get("decode_seconds")
            return row.get("prompt_seconds"), decode and batch * self.config["tokens"] / decode, row.get("peak_rise_bytes")
        prompt = self.row(**labels, phase="prompt")
        low, high = (self.row(**labels, phase=n).get("seconds") for n in (FIRST, FIRST + self.config["tokens"]))
        speed = None if low is None or high is None or high <= low else batch * self.config["tokens"] / (high - low)
        return prompt.get("seconds"), speed, prompt.get("peak_rise_bytes")


def render(data: dict) -> str:
    readings, config = Readings(data), data["config"]
    table = []
    for name in config["models"]:
        for length in config["lengths"]:
            for batch in config["batches"]:
                measured = {loop: readings.phases(loop, name, length, batch) for loop in LOOPS}
                cells = []
                for loop in LOOPS:
                    prompt, speed, peak = measured[loop]
                    cells += [MISSING if prompt is None else f"{prompt:.2f} s",
                              MISSING if speed is None else f"{speed:.1f}", f"+{mib(peak)} MiB"]
                speeds = [measured[loop][1] for loop in LOOPS]
                ratio = f"{speeds[0] / speeds[1]:.2f}x" if all(speeds) else MISSING
                table.append([name, f"{length:,}", str(batch), *cells, ratio])
    head = ["model", "prompt", "sequences",
            *[f"{loop} {what}" for loop in LOOPS for what in ("prompt", "decoding tok/s", "peak")],
            "decoding, vLLM / layerzoo"]
    caption = (f"{', '.join(config['models'])} at {' '.join(SIZE)}, heads of 64, random weights; fp32, greedy, "
               f"{config['threads']} thread{'s' if config['threads'] != 1 else ''}; prompts read {config['chunk']:,} "
               f"tokens of each sequence a step (vLLM: a sequence alone takes {max(config['batches']) * config['chunk']:,}); "
               f"decoding: {config['tokens']} tokens per sequence timed, output tokens/s of all sequences together; "
               f"best of {config['reps']} interleaved rounds (cells over {config['budget']:g} s: one run); peak: the rise "
               f"of the process's resident set in the prompt's call (vLLM: the whole call), outside which vLLM reserves "
               f"{config['kv_space']} GiB of key/value cache per engine")
    return f"{caption}\n\n{markdown_table(head, table)}"


BENCHMARK = Benchmark(
    name="vllm", description="Serving through vLLM against layerzoo's generate: output tokens/s and memory",
    add_arguments=add_arguments, run=run, render=render, unavailable=unavailable, environment=environment,
    packages=("vllm", "vllm-cpu", "transformers"),  # vLLM's distribution is vllm-cpu on CPU
    smoke={"lengths": [64], "batches": [1, 2], "tokens": 2, "chunk": 32, "kv_space": 1},
)
