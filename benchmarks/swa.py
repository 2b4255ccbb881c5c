"""Sliding-window attention: layerzoo's default backend against dense-masked SDPA.

    python benchmarks/swa.py                      # CPU, fp32, T = 1024 ... 16384, window 128
    python benchmarks/swa.py --seq-lens 4096 --json swa.json

Prints a markdown table of median forward and forward+backward times, the dense/ours ratios, and
(on Linux CPU) the peak extra resident memory of one forward+backward, each in a fresh subprocess
since torch's CPU allocations are invisible to tracemalloc. The baseline is what model code usually
does: F.scaled_dot_product_attention with a dense (T, T) boolean window mask, built outside the
timed region.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerzoo.kernels import choose_swa_backend, sliding_window_attention  # noqa: E402
from layerzoo.kernels.sliding_window import sliding_window_mask  # noqa: E402

from common import (  # noqa: E402
    CLEAR_REFS, markdown_table, probe_in_subprocess, rss_rise_bytes, sweep_parser, timed_runs,
)

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
METHODS = ("ours", "dense")


def make_inputs(args, seq_len: int, requires_grad: bool):
    gen = torch.Generator().manual_seed(0)
    dtype = DTYPES[args.dtype]

    def rand(heads):
        t = torch.randn(args.batch, seq_len, heads, args.dim, generator=gen).to(args.device, dtype)
        return t.requires_grad_(requires_grad)

    return rand(args.heads), rand(args.kv_heads), rand(args.kv_heads)


def attention_fn(args, method: str, seq_len: int):
    """(q, k, v) -> out, both in (B, T, H, D) layout; setup such as the dense mask is done here."""
    if method == "ours":
        return lambda q, k, v: sliding_window_attention(q, k, v, args.window, backend=args.backend)
    mask = sliding_window_mask(seq_len, seq_len, args.window, device=args.device)
    gqa = args.heads != args.kv_heads

    def dense(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=gqa).transpose(1, 2)

    return dense


def forward_backward(fn, q, k, v, grad_out) -> None:
    # A dense grad_out: out.sum().backward() would pass a stride-0 gradient, which takes other paths.
    fn(q, k, v).backward(grad_out)
    q.grad = k.grad = v.grad = None


def median_seconds(args, fn) -> float:
    """Median of up to args.reps runs after args.warmup, fewer (>= 3) when one run is slow."""
    times = timed_runs(fn, args.device, reps=args.reps, budget=args.budget, warmup=args.warmup)
    return statistics.median(times)


def time_method(args, method: str, seq_len: int) -> dict:
    fn = attention_fn(args, method, seq_len)
    q, k, v = make_inputs(args, seq_len, requires_grad=False)
    with torch.no_grad():
        forward = median_seconds(args, lambda: fn(q, k, v))
    inputs = make_inputs(args, seq_len, requires_grad=True)
    grad_out = torch.randn_like(inputs[0])
    forward_backward_s = median_seconds(args, lambda: forward_backward(fn, *inputs, grad_out))
    return {"forward_s": forward, "forward_backward_s": forward_backward_s}


def probe_memory(args, method: str, seq_len: int) -> int:
    """Child side: bytes by which one forward+backward raises this process's resident set."""
    # Small warm-ups first, so one-off costs (thread pools, lazily loaded kernels) are not counted.
    small = min(seq_len, 2 * args.window)
    for _ in range(2):
        inputs = make_inputs(args, small, requires_grad=True)
        forward_backward(attention_fn(args, method, small), *inputs, torch.randn_like(inputs[0]))
    inputs = make_inputs(args, seq_len, requires_grad=True)
    grad_out = torch.randn_like(inputs[0])
    # attention_fn inside the measured call: the dense (T, T) mask is part of what the dense
    # baseline costs.
    return rss_rise_bytes(lambda: forward_backward(attention_fn(args, method, seq_len), *inputs, grad_out))


def mib(n_bytes: float) -> str:
    return f"{n_bytes / 2**20:.0f}"


def markdown(rows: list[dict], memory: bool) -> str:
    head = ["T", "backend", "ours fwd ms", "dense fwd ms", "fwd ratio"]
    head += ["ours fwd+bwd ms", "dense fwd+bwd ms", "fwd+bwd ratio"]
    if memory:
        head += ["ours peak MiB", "dense peak MiB"]
    table = []
    for r in rows:
        ours, dense = r["ours"], r["dense"]
        cells = [
            str(r["seq_len"]),
            r["backend"],
            f"{ours['forward_s'] * 1e3:.1f}",
            f"{dense['forward_s'] * 1e3:.1f}",
            f"{r['forward_ratio']:.1f}x",
            f"{ours['forward_backward_s'] * 1e3:.1f}",
            f"{dense['forward_backward_s'] * 1e3:.1f}",
            f"{r['forward_backward_ratio']:.1f}x",
        ]
        if memory:
            cells += [mib(ours["peak_extra_bytes"]), mib(dense["peak_extra_bytes"])]
        table.append(cells)
    return markdown_table(head, table)


def main() -> None:
    parser = sweep_parser(__doc__)
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--kv-heads", type=int, help="grouped-query kv heads (default: --heads)")
    parser.add_argument("--dim", type=int, default=64, help="head dim")
    parser.add_argument("--dtype", choices=DTYPES, default="fp32")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--backend", default="auto", help="layerzoo backend for 'ours'")
    parser.add_argument("--reps", type=int, default=5, help="timed runs per measurement (median)")
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument(
        "--budget", type=float, default=10.0, help="stop after 3 runs past this many seconds"
    )
    parser.add_argument(
        "--no-memory", dest="memory", action="store_false", help="skip the peak-RSS subprocesses"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--probe-memory", nargs=2, metavar=("METHOD", "T"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.kv_heads = args.kv_heads or args.heads

    if args.probe_memory:
        method, seq_len = args.probe_memory
        print(probe_memory(args, method, int(seq_len)))
        return
    # RSS says nothing about GPU memory; resetting its peak needs Linux's /proc/self/clear_refs.
    memory = args.memory and args.device == "cpu" and CLEAR_REFS.exists()

    rows = []
    for seq_len in args.seq_lens:
        q, k, _ = make_inputs(args, seq_len, requires_grad=False)
        row = {"seq_len": seq_len, "backend": choose_swa_backend(q, k, args.window, args.backend)}
        for method in METHODS:
            row[method] = time_method(args, method, seq_len)
            if memory:
                row[method]["peak_extra_bytes"] = probe_in_subprocess(__file__, method, seq_len)
        for key in ("forward", "forward_backward"):
            row[f"{key}_ratio"] = row["dense"][f"{key}_s"] / row["ours"][f"{key}_s"]
        rows.append(row)
        print(f"T={seq_len} done ({row['backend']})", file=sys.stderr, flush=True)

    config = {k: v for k, v in vars(args).items() if k not in ("json", "probe_memory", "memory")}
    print(
        f"sliding-window attention, window={args.window}, B={args.batch}, H={args.heads}, "
        f"Hkv={args.kv_heads}, D={args.dim}, {args.dtype}, {args.device}, "
        f"{torch.get_num_threads()} threads; ours = sliding_window_attention(backend={args.backend!r}); "
        f"dense = SDPA with a (T, T) boolean mask; ratio = dense / ours"
    )
    print()
    print(markdown(rows, memory))
    if memory:
        print("\npeak MiB: rise of peak RSS over one forward+backward (dense: mask included; q, k, v, "
            "grad_out excluded), one fresh process per cell")
    if args.json:
        result = {"config": config, "torch": torch.__version__, "rows": rows}
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
