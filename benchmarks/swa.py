"""Sliding-window attention on CPU: layerzoo's `auto` backend against compiled FlexAttention and dense-masked SDPA.

    python -m benchmarks swa                                  # T = 2048 ... 32768, windows 128 and 2048
    python -m benchmarks swa --seq-lens 8192 --windows 128 --memory

Inputs q (B, T, H, D), k and v (B, T, Hkv, D), B=1, H=Hkv=8, D=64 by default. Every cell (a
method, a T, a window, forward or forward+backward) is a cell of the same interleaved rounds
(runner/timing.py). The peers:
- flex: torch.compile(flex_attention) with a sliding-window block mask (layerzoo's "flex"
  backend), forward only: FlexAttention has no backward on CPU. Its first call compiles; that
  one-time cost is a row of its own ("first_call"), and every later shape's recompile happens
  before the rounds.
- dense: F.scaled_dot_product_attention with a dense (T, T) boolean window mask (what model code
  usually does), the mask built outside the timed region; O(T^2), so skipped above
  --dense-max-len.
The GFLOP/s column counts the forward's 4 * T * window * D * H useful flops. With --memory, the
peak memory of one forward+backward of ours and dense (the dense mask's included; q, k, v and
the gradient not), each in a fresh process.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from layerzoo.kernels import choose_sliding_window_backend, sliding_window_attention
from layerzoo.kernels.sliding_window import BACKENDS, sliding_window_mask

from .runner.arguments import DTYPES, add_dtype, add_memory_switch, add_seq_lens, positive_int
from .runner.kernel_modes import kernel_modes
from .runner.memory import can_measure
from .runner.registry import Benchmark
from .runner.summary import SummaryRow, against_best_peer
from .runner.results import value
from .runner.tables import markdown_table, mib, ms, rate_of_matmul, ratio, share_of_matmul
from .runner.timing import Cell, first_call_seconds, matmul_gflops, time_cells

SUMMARY_AT = 8192
FIRST_CALL = "first_call"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_seq_lens(parser, [2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--windows", type=positive_int, nargs="+", default=[128, 2048])
    parser.add_argument("--batch", type=positive_int, default=1)
    parser.add_argument("--heads", type=positive_int, default=8)
    parser.add_argument("--kv-heads", type=positive_int, help="grouped-query kv heads (default: --heads)")
    parser.add_argument("--dim", type=positive_int, default=64, help="head dim")
    add_dtype(parser)
    parser.add_argument("--backend", default="auto", help="layerzoo's backend for 'ours'")
    parser.add_argument("--dense-max-len", type=positive_int, default=16384, help="skip dense SDPA above this T")
    add_memory_switch(parser, default=False)


def make_inputs(args: argparse.Namespace, seq_len: int) -> tuple[list[torch.Tensor], torch.Tensor]:
    """q, k, v and a gradient of the output (shaped as q)."""
    gen = torch.Generator().manual_seed(0)

    def rand(heads: int) -> torch.Tensor:
        return torch.randn(args.batch, seq_len, heads, args.dim, generator=gen).to(DTYPES[args.dtype])

    q, k, v = rand(args.heads), rand(args.kv_heads or args.heads), rand(args.kv_heads or args.heads)
    return [q, k, v], torch.randn_like(q)


def attention_fn(args: argparse.Namespace, method: str, seq_len: int, window: int):
    """(q, k, v) -> out, both (B, T, H, D); setup such as the dense mask is done here."""
    if method == "ours":
        return lambda q, k, v: sliding_window_attention(q, k, v, window, backend=args.backend)
    if method == "flex":
        return lambda q, k, v: BACKENDS["flex"](q=q, k=k, v=v, window=window, scale=args.dim**-0.5)
    mask = sliding_window_mask(seq_len, seq_len, window)
    gqa = (args.kv_heads or args.heads) != args.heads

    def dense(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa).transpose(1, 2)

    return dense


def methods_at(args: argparse.Namespace, seq_len: int) -> dict[str, tuple[str, ...]]:
    """{method: the modes it is timed in} at seq_len."""
    methods = {"ours": ("forward", "forward_backward"), "flex": ("forward",)}
    if seq_len <= args.dense_max_len:
        methods["dense"] = ("forward", "forward_backward")
    return methods


def cells_at(args: argparse.Namespace, seq_len: int, window: int) -> list[Cell]:
    inputs, grad_out = make_inputs(args, seq_len)
    cells = []
    for method, wanted in methods_at(args, seq_len).items():
        modes = kernel_modes(attention_fn(args, method, seq_len, window), inputs, grad_out)
        cells += [Cell({"window": window, "seq_len": seq_len, "method": method, "mode": mode}, modes[mode])
                  for mode in wanted]
    return cells


def run(args: argparse.Namespace) -> dict:
    seq_len, window = args.seq_lens[0], args.windows[0]
    # What loads on first use, before the rounds: our kernel's build, and compiled FlexAttention,
    # whose first call (its compile) is timed as a row of its own.
    inputs, grad_out = make_inputs(args, seq_len)
    kernel_modes(attention_fn(args, "ours", seq_len, window), inputs, grad_out)["forward_backward"]()
    flex = kernel_modes(attention_fn(args, "flex", seq_len, window), inputs, grad_out)["forward"]
    compile_row = {"cell": {"method": "flex", "mode": FIRST_CALL}, "seconds": first_call_seconds(flex)}
    cells = [cell for window in args.windows for seq_len in args.seq_lens for cell in cells_at(args, seq_len, window)]
    # Each shape recompiles flex: outside the rounds. The rest need no warm-up call (the best of
    # the rounds counts), which would double the time of the sweep's slowest cells.
    warmups = [cell.run for cell in cells if cell.labels["method"] == "flex"]
    rows = time_cells(cells, rounds=args.reps, budget=args.budget, warmups=warmups)
    backends = [{"window": w, "seq_len": t, "backend": choose_sliding_window_backend(*make_inputs(args, t)[0][:2], w,
                                                                                     args.backend)}
                for w in args.windows for t in args.seq_lens]
    return {"rows": [compile_row, *rows], "auto_backend": backends}


def memory_cells(args: argparse.Namespace) -> list[dict]:
    if not (args.memory and can_measure("cpu")):
        return []
    return [{"window": window, "seq_len": seq_len, "method": method, "mode": "forward_backward"}
            for window in args.windows for seq_len in args.seq_lens
            for method in methods_at(args, seq_len) if method != "flex"]


def memory_probe(args: argparse.Namespace, labels: dict):
    """One forward+backward of the cell, the attention function (the dense mask) made inside it."""
    method, seq_len, window = labels["method"], labels["seq_len"], labels["window"]
    small = min(seq_len, 2 * window)  # warm-ups, so one-off costs (thread pools, kernels) are not counted
    for _ in range(2):
        kernel_modes(attention_fn(args, method, small, window), *make_inputs(args, small))["forward_backward"]()
    return kernel_modes(lambda *x: attention_fn(args, method, seq_len, window)(*x),
                        *make_inputs(args, seq_len))["forward_backward"]


def forward_flops(config: dict, seq_len: int, window: int) -> int:
    return 4 * config["batch"] * seq_len * min(window, seq_len) * config["dim"] * config["heads"]


def render(data: dict) -> str:
    config, rows = data["config"], data["rows"]
    gflops = matmul_gflops(rows)
    memory = any("peak_bytes" in row for row in rows)
    head = ["window", "T", "backend", "ours fwd ms", "flex fwd ms", "dense fwd ms", "flex/ours fwd", "dense/ours fwd",
            "ours fwd+bwd ms", "dense fwd+bwd ms", "dense/ours fwd+bwd", "ours fwd GFLOP/s (of matmul)"]
    head += ["ours peak MiB", "dense peak MiB"] if memory else []
    table = []
    for entry in data["auto_backend"]:
        window, seq_len = entry["window"], entry["seq_len"]

        def get(method, mode, measure="seconds"):
            return value(rows, measure, window=window, seq_len=seq_len, method=method, mode=mode)

        ours, flex, dense = (get(m, "forward") for m in ("ours", "flex", "dense"))
        ours_fb, dense_fb = get("ours", "forward_backward"), get("dense", "forward_backward")
        cells = [str(window), str(seq_len), entry["backend"], ms(ours), ms(flex), ms(dense), ratio(flex, ours),
                 ratio(dense, ours), ms(ours_fb), ms(dense_fb), ratio(dense_fb, ours_fb),
                 rate_of_matmul(forward_flops(config, seq_len, window), ours, gflops)]
        if memory:
            cells += [mib(get(m, "forward_backward", "peak_bytes"), 0) for m in ("ours", "dense")]
        table.append(cells)
    compile_seconds = value(rows, "seconds", method="flex", mode=FIRST_CALL)
    caption = (f"B={config['batch']}, H={config['heads']}, Hkv={config['kv_heads'] or config['heads']}, "
               f"D={config['dim']}, {config['dtype']}, best of {config['reps']} interleaved rounds; ours = "
               f"sliding_window_attention(backend={config['backend']!r}); flex's first call (its compile) took "
               f"{compile_seconds:.1f} s; dense skipped above T = {config['dense_max_len']}")
    notes = ["peak MiB: the rise of the peak RSS over one forward+backward, one fresh process per cell"] if memory else []
    return "\n\n".join([caption, markdown_table(head, table), *notes])


def summary(data: dict) -> list[SummaryRow]:
    """Ours against the faster peer at one T per window: forward (flex or dense), forward+backward (dense)."""
    config, rows = data["config"], data["rows"]
    seq_len = SUMMARY_AT if SUMMARY_AT in config["seq_lens"] else max(config["seq_lens"])
    shape = f"B{config['batch']} H{config['heads']} D{config['dim']}, T {seq_len}"
    peers = {"flex": "FlexAttention, torch.compile'd", "dense": "SDPA, dense window mask"}
    gflops = matmul_gflops(rows)
    result = []
    for window in config["windows"]:
        for mode, label in (("forward", "forward"), ("forward_backward", "forward+backward")):
            def seconds(method):
                return value(rows, "seconds", window=window, seq_len=seq_len, method=method, mode=mode)

            ours = seconds("ours")
            share = share_of_matmul(forward_flops(config, seq_len, window), ours, gflops) if ours and mode == "forward" else ""
            result += against_best_peer(f"SWA {label}, window {window}", shape, ours,
                                        {name: seconds(method) for method, name in peers.items()}, share)
    return result


BENCHMARK = Benchmark(
    name="swa", description="Sliding-window attention on CPU: ours against compiled FlexAttention and dense-masked SDPA",
    add_arguments=add_arguments, run=run, render=render, summary=summary, memory_cells=memory_cells,
    memory_probe=memory_probe,
    smoke={"seq_lens": [64, 128], "windows": [16], "heads": 2, "dim": 16, "dense_max_len": 128},
)
