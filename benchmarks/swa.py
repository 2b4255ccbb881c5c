"""Sliding-window attention on CPU: layerzoo's `auto` backend against compiled FlexAttention and dense-masked SDPA.

    python benchmarks/swa.py                                  # T = 2048 ... 32768, windows 128 and 2048
    python benchmarks/swa.py --seq-lens 8192 --windows 128 --json swa.json

Every cell (a method, a T, a window, forward or forward+backward) runs once per round, rounds
interleave all cells and the best of them counts (common.interleaved_best_seconds), so a busy
spell of a shared machine slows all alike. The peers, measured in the same rounds:
- flex: torch.compile(flex_attention) with a sliding-window block mask (layerzoo's "flex"
  backend), forward only: FlexAttention has no backward on CPU. Its first call compiles; that
  one-time cost is printed, and every later shape's recompile happens before the rounds.
- dense: F.scaled_dot_product_attention with a dense (T, T) boolean window mask (what model code
  usually does), the mask built outside the timed region; O(T^2), so skipped above
  --dense-max-len.
A (2048, 2048) fp32 matmul in the same rounds gives the machine's rate: the GFLOP/s column counts
the forward's 4 * T * window * D * H useful flops.
With --memory, the peak extra resident memory of one forward+backward of ours and dense, each in a
fresh subprocess since torch's CPU allocations are invisible to tracemalloc.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerzoo.kernels import choose_sliding_window_backend, sliding_window_attention  # noqa: E402
from layerzoo.kernels.sliding_window import BACKENDS, sliding_window_mask  # noqa: E402

from common import (  # noqa: E402
    CLEAR_REFS, interleaved_best_seconds, markdown_table, matmul, probe_in_subprocess, rss_rise_bytes, sweep_parser,
    write_json,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def make_inputs(args, seq_len: int, requires_grad: bool):
    gen = torch.Generator().manual_seed(0)
    dtype = DTYPES[args.dtype]

    def rand(heads):
        t = torch.randn(args.batch, seq_len, heads, args.dim, generator=gen).to(args.device, dtype)
        return t.requires_grad_(requires_grad)

    return rand(args.heads), rand(args.kv_heads), rand(args.kv_heads)


def attention_fn(args, method: str, seq_len: int, window: int):
    """(q, k, v) -> out, both in (B, T, H, D) layout; setup such as the dense mask is done here."""
    if method == "ours":
        return lambda q, k, v: sliding_window_attention(q, k, v, window, backend=args.backend)
    if method == "flex":
        return lambda q, k, v: BACKENDS["flex"](q, k, v, window, args.dim**-0.5)
    mask = sliding_window_mask(seq_len, seq_len, window, device=args.device)
    gqa = args.heads != args.kv_heads

    def dense(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa).transpose(1, 2)

    return dense


def forward_backward(fn, q, k, v, grad_out) -> None:
    # A dense grad_out: out.sum().backward() would pass a stride-0 gradient, which takes other paths.
    fn(q, k, v).backward(grad_out)
    q.grad = k.grad = v.grad = None


def methods_at(args, seq_len: int) -> dict[str, tuple[str, ...]]:
    """{method: the modes it is timed in} at seq_len."""
    methods = {"ours": ("forward", "forward_backward"), "flex": ("forward",)}
    if seq_len <= args.dense_max_len:
        methods["dense"] = ("forward", "forward_backward")
    return methods


def cells_at(args, seq_len: int, window: int) -> dict:
    """{(method, mode): fn} of one (T, window)."""
    q, k, v = make_inputs(args, seq_len, requires_grad=False)
    inputs = make_inputs(args, seq_len, requires_grad=True)
    grad_out = torch.randn_like(inputs[0])
    cells = {}
    for method, modes in methods_at(args, seq_len).items():
        fn = attention_fn(args, method, seq_len, window)
        for mode in modes:
            if mode == "forward":
                cells[method, mode] = lambda fn=fn: _no_grad(fn, q, k, v)
            else:
                cells[method, mode] = lambda fn=fn: forward_backward(fn, *inputs, grad_out)
    return cells


def _no_grad(fn, q, k, v):
    with torch.no_grad():
        return fn(q, k, v)


def probe_memory(args, method: str, seq_len: int, window: int) -> int:
    """Child side: bytes by which one forward+backward raises this process's resident set."""
    # Small warm-ups first, so one-off costs (thread pools, lazily loaded kernels) are not counted.
    small = min(seq_len, 2 * window)
    for _ in range(2):
        inputs = make_inputs(args, small, requires_grad=True)
        forward_backward(attention_fn(args, method, small, window), *inputs, torch.randn_like(inputs[0]))
    inputs = make_inputs(args, seq_len, requires_grad=True)
    grad_out = torch.randn_like(inputs[0])
    # attention_fn inside the measured call: the dense (T, T) mask is part of what the dense
    # baseline costs.
    return rss_rise_bytes(lambda: forward_backward(attention_fn(args, method, seq_len, window), *inputs, grad_out))


def first_calls(args) -> float:
    """Run what loads on first use before the rounds, at the sweep's first shape: our backend (the
    compiled kernel builds) and compiled FlexAttention, whose first call's seconds (its compile)
    this returns."""
    seq_len, window = args.seq_lens[0], args.windows[0]
    inputs = make_inputs(args, seq_len, requires_grad=True)
    forward_backward(attention_fn(args, "ours", seq_len, window), *inputs, torch.randn_like(inputs[0]))
    start = time.perf_counter()
    _no_grad(attention_fn(args, "flex", seq_len, window), *make_inputs(args, seq_len, requires_grad=False))
    return time.perf_counter() - start


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.1f}"


def ratio(a: float | None, b: float) -> str:
    return "-" if a is None else f"{a / b:.1f}x"


def markdown(rows: list[dict], matmul_gflops: float, memory: bool) -> str:
    head = ["window", "T", "backend", "ours fwd ms", "flex fwd ms", "dense fwd ms", "flex/ours fwd", "dense/ours fwd",
            "ours fwd+bwd ms", "dense fwd+bwd ms", "dense/ours fwd+bwd", "ours fwd GFLOP/s (of matmul)"]
    if memory:
        head += ["ours peak MiB", "dense peak MiB"]
    table = []
    for r in rows:
        t = r["seconds"]
        ours = t["ours", "forward"]
        dense, dense_fb = t.get(("dense", "forward")), t.get(("dense", "forward_backward"))
        gflops = r["forward_flops"] / ours / 1e9
        cells = [str(r["window"]), str(r["seq_len"]), r["backend"], ms(ours), ms(t["flex", "forward"]), ms(dense),
                 ratio(t["flex", "forward"], ours), ratio(dense, ours), ms(t["ours", "forward_backward"]), ms(dense_fb),
                 ratio(dense_fb, t["ours", "forward_backward"]), f"{gflops:.1f} ({gflops / matmul_gflops:.0%})"]
        if memory:
            cells += [f"{r['peak_bytes'][m] / 2**20:.0f}" if m in r["peak_bytes"] else "-" for m in ("ours", "dense")]
        table.append(cells)
    return markdown_table(head, table)


def main() -> None:
    parser = sweep_parser(__doc__)
    parser.set_defaults(seq_lens=[2048, 4096, 8192, 16384, 32768])
    parser.add_argument("--windows", type=int, nargs="+", default=[128, 2048])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, help="grouped-query kv heads (default: --heads)")
    parser.add_argument("--dim", type=int, default=64, help="head dim")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--backend", default="auto", help="layerzoo backend for 'ours'")
    parser.add_argument("--dense-max-len", type=int, default=16384, help="skip dense SDPA above this T")
    parser.add_argument("--reps", type=int, default=5, help="interleaved rounds (the fastest counts)")
    parser.add_argument("--budget", type=float, default=10.0, help="a cell stops repeating after this many seconds")
    parser.add_argument("--memory", action="store_true", help="also the peak-RSS subprocesses (Linux)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--probe-memory", nargs=3, metavar=("METHOD", "T", "WINDOW"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.kv_heads = args.kv_heads or args.heads
    args.device = "cpu"  # the flex peer is CPU FlexAttention; the CUDA backends have their own check

    if args.probe_memory:
        method, seq_len, window = args.probe_memory
        print(probe_memory(args, method, int(seq_len), int(window)))
        return
    memory = args.memory and CLEAR_REFS.exists()  # resetting the peak needs Linux's /proc/self/clear_refs

    compile_seconds = first_calls(args)
    print(f"compiled FlexAttention: first call {compile_seconds:.1f} s (compile)", file=sys.stderr, flush=True)
    matmul_fn, matmul_flops = matmul(args.device)
    cells = {"matmul": matmul_fn}
    for window in args.windows:
        for seq_len in args.seq_lens:
            for key, fn in cells_at(args, seq_len, window).items():
                # Each shape recompiles flex: not in the rounds. The rest need no warm-up call (the
                # first call above built our kernel; the best of the rounds counts), which would
                # double the time of the sweep's slowest cells.
                if key[0] == "flex":
                    fn()
                cells[(window, seq_len, *key)] = fn
    best = interleaved_best_seconds(cells, args.reps, args.budget, args.device)
    matmul_gflops = matmul_flops / best.pop("matmul") / 1e9

    rows = []
    for window in args.windows:
        for seq_len in args.seq_lens:
            q, k, _ = make_inputs(args, seq_len, requires_grad=False)
            row = {"window": window, "seq_len": seq_len, "backend": choose_sliding_window_backend(q, k, window, args.backend),
                   "forward_flops": 4 * args.batch * seq_len * min(window, seq_len) * args.dim * args.heads,
                   "seconds": {key[2:]: s for key, s in best.items() if key[:2] == (window, seq_len)}}
            if memory:
                row["peak_bytes"] = {m: probe_in_subprocess(__file__, m, seq_len, window)
                                     for m in methods_at(args, seq_len) if m != "flex"}
            rows.append(row)

    print(
        f"sliding-window attention, B={args.batch}, H={args.heads}, Hkv={args.kv_heads}, D={args.dim}, {args.dtype}, "
        f"cpu, {torch.get_num_threads()} threads, best of {args.reps} interleaved rounds; "
        f"ours = sliding_window_attention(backend={args.backend!r}); flex = compiled flex_attention with a "
        f"sliding-window block mask (forward only on CPU; first call {compile_seconds:.1f} s to compile); dense = SDPA "
        f"with a (T, T) boolean mask (skipped above T = {args.dense_max_len}); fp32 matmul {matmul_gflops:.1f} GFLOP/s"
    )
    print()
    print(markdown(rows, matmul_gflops, memory))
    if memory:
        print("\npeak MiB: rise of peak RSS over one forward+backward (dense: mask included; q, k, v, "
              "grad_out excluded), one fresh process per cell")
    for row in rows:
        row["seconds"] = {"/".join(key): s for key, s in row["seconds"].items()}
    write_json(args, compile_seconds=compile_seconds, matmul_gflops=matmul_gflops, rows=rows)


if __name__ == "__main__":
    main()
