"""GPU kernel table: our Triton kernels against the field's, forward and forward+backward.

    python -m benchmarks gpu_kernels                          # CUDA, bf16, T = 2k, 8k, 32k at 64k tokens
    python -m benchmarks gpu_kernels --kernels mlstm swa      # some rows (the GPU check's)
    TRITON_INTERPRET=1 python -m benchmarks gpu_kernels --smoke   # CPU: every row runs, tiny shapes

Rows, at B * T = --tokens so that every row does the same work per token:
- mLSTM, q, k (B, T, H, Dk), v (B, T, H, Dv), H=16, Dk=128, Dv=256: ours (backend "triton") vs
  mlstm_kernels' TFLA Triton kernel (when installed) vs our PyTorch chunkwise backend;
- SWA, window 128 and 2048, q, k, v (B, T, H, D), H=16, D=128: ours (backend "triton") vs
  FlexAttention with a sliding-window block mask (our "flex" backend) vs flash-attn's window
  (when installed);
- Gated DeltaNet, H=16, K=128, V=256, through flash-linear-attention (our "fla" backend), for
  reference: it is the maintained kernel we keep.
A peer that is missing or fails is a row saying so, never silently dropped. Every working cell is
timed in the same interleaved rounds after two warm-up calls (Triton's compiles and autotuning).
--smoke shrinks every shape so that the benchmark itself can be checked on a CPU through the
Triton interpreter (the peers that need CUDA then say so).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable

import torch
import torch.nn.functional as F

from layerzoo.kernels import gated_delta_rule, mlstm, sliding_window_attention

from .runner.arguments import DTYPES, add_device, add_dtype, add_seq_lens, positive_int
from .runner.kernel_modes import MODES, kernel_modes
from .runner.registry import Benchmark
from .runner.summary import SummaryRow, against_best_peer
from .runner.tables import markdown_table, ms
from .runner.timing import Cell, time_cells

OURS = "ours (triton)"
KERNELS = ("mlstm", "swa", "gdn")
WARMUP_CALLS = 2
# A kernel under test, called on the row's inputs; a row maps each peer's name to (runner, "") or,
# when it cannot run here, (None, why not).
Runner = Callable[..., torch.Tensor]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_seq_lens(parser, [2048, 8192, 32768])
    parser.add_argument("--tokens", type=positive_int, default=65536, help="B * T of every row")
    parser.add_argument("--windows", type=positive_int, nargs="+", default=[128, 2048])
    parser.add_argument("--kernels", nargs="+", choices=KERNELS, default=list(KERNELS),
                        help="the rows to run (gdn: fla's autotuning takes minutes on a fresh machine)")
    parser.add_argument("--heads", type=positive_int, default=16)
    parser.add_argument("--key-dim", type=positive_int, default=128, help="mLSTM's and Gated DeltaNet's")
    parser.add_argument("--value-dim", type=positive_int, default=256, help="mLSTM's and Gated DeltaNet's")
    parser.add_argument("--head-dim", type=positive_int, default=128, help="SWA's")
    add_dtype(parser, default="bf16")
    add_device(parser, default="cuda" if torch.cuda.is_available() else "cpu")
    parser.set_defaults(reps=10, budget=2.0)


def unavailable(args: argparse.Namespace) -> str | None:
    if args.device.startswith("cuda") or (args.smoke and os.environ.get("TRITON_INTERPRET") == "1"):
        return None
    return ("needs a CUDA device (the GPU check: bash benchmarks/gpu_check.sh); "
            "TRITON_INTERPRET=1 python -m benchmarks gpu_kernels --smoke checks it on a CPU")


def needs_cuda(args: argparse.Namespace, runner: Runner) -> tuple[Runner | None, str]:
    return (runner, "") if args.device.startswith("cuda") else (None, "needs CUDA")


def tfla_runner() -> tuple[Runner | None, str]:
    """mlstm_kernels' TFLA kernel in our layout, or None and why not."""
    try:
        from mlstm_kernels.torch.chunkwise.triton_xl_chunk import mlstm_chunkwise__xl_chunk
    except ImportError as error:
        return None, f"mlstm_kernels not installed ({error.name})"

    def run(q, k, v, i, f):
        # TFLA lays tensors out (B, H, T, D); the transposes are part of what a caller pays.
        return mlstm_chunkwise__xl_chunk(*(t.transpose(1, 2) for t in (q, k, v, i, f)), chunk_size=128).transpose(1, 2)

    return run, ""


def flash_attn_runner(window: int) -> tuple[Runner | None, str]:
    try:
        from flash_attn import flash_attn_func
    except ImportError:
        return None, "flash-attn not installed"
    return (lambda q, k, v: flash_attn_func(q, k, v, causal=True, window_size=(window - 1, 0))), ""


def kernel_rows(args: argparse.Namespace, batch: int, length: int) -> list[tuple[str, list, torch.Tensor, dict]]:
    """(kernel, inputs, a gradient of the output, {peer: (runner, why not)}) of every row of
    args.kernels at T = length."""
    gen = torch.Generator().manual_seed(0)
    dtype, device, heads = DTYPES[args.dtype], args.device, args.heads

    def rand(*shape, scale=1.0, shift=0.0):
        return scale * torch.randn(*shape, generator=gen) + shift

    rows = []
    if "mlstm" in args.kernels:
        inputs = [rand(batch, length, heads, args.key_dim), rand(batch, length, heads, args.key_dim),
                  rand(batch, length, heads, args.value_dim), rand(batch, length, heads),
                  rand(batch, length, heads, shift=3.0)]  # forget gates near sigmoid(3), as at init
        inputs = [t.to(device, dtype if t.dim() == 4 else torch.float32) for t in inputs]
        rows.append(("mLSTM", inputs, torch.randn_like(inputs[2]), {
            OURS: (lambda *x: mlstm(*x, backend="triton"), ""), "mlstm_kernels TFLA": tfla_runner(),
            "ours (PyTorch chunkwise)": (lambda *x: mlstm(*x, backend="chunkwise"), "")}))
    for window in args.windows if "swa" in args.kernels else ():
        qkv = [rand(batch, length, heads, args.head_dim).to(device, dtype) for _ in range(3)]
        rows.append((f"SWA w={window}", qkv, torch.randn_like(qkv[0]), {
            OURS: (lambda q, k, v, w=window: sliding_window_attention(q, k, v, w, backend="triton"), ""),
            "FlexAttention": needs_cuda(args, lambda q, k, v, w=window: sliding_window_attention(q, k, v, w, backend="flex")),
            "flash-attn": flash_attn_runner(window)}))
    if "gdn" in args.kernels:
        q, v = rand(batch, length, heads, args.key_dim), rand(batch, length, heads, args.value_dim)
        k = F.normalize(rand(batch, length, heads, args.key_dim), dim=-1)
        g, beta = F.logsigmoid(rand(batch, length, heads, shift=2.0)), torch.rand(batch, length, heads, generator=gen)
        gdn = [t.to(device, dtype) for t in (q, k, v)] + [t.to(device) for t in (g, beta)]
        rows.append(("Gated DeltaNet", gdn, torch.randn_like(gdn[2]),
                     {"fla": needs_cuda(args, lambda *x: gated_delta_rule(*x, backend="fla"))}))
    return rows


def first_error(modes: dict) -> str | None:
    """Run each mode WARMUP_CALLS times (Triton compiles, autotunes); the first failure, or None."""
    try:
        for fn in modes.values():
            for _ in range(WARMUP_CALLS):
                fn()
    except Exception as error:  # a peer that fails on this machine is reported, not fatal
        return f"{type(error).__name__}: {str(error).splitlines()[0][:80] if str(error) else ''}"
    return None


def run(args: argparse.Namespace) -> dict:
    cells, errors, peer_order = [], [], []
    for length in args.seq_lens:
        batch = max(1, args.tokens // length)
        for kernel, inputs, grad_out, peers in kernel_rows(args, batch, length):
            for method, (runner, why_not) in peers.items():
                labels = {"kernel": kernel, "seq_len": length, "batch": batch, "method": method}
                peer_order.append(labels)
                modes = kernel_modes(runner, inputs, grad_out) if runner else {}
                why_not = why_not or first_error(modes)
                if why_not:
                    errors.append({"cell": labels, "error": why_not})
                    continue
                cells += [Cell({**labels, "mode": mode}, fn) for mode, fn in modes.items()]
    rows = errors + time_cells(cells, rounds=args.reps, budget=args.budget, device=args.device)

    def declared(row: dict) -> int:  # the matmul first, then the peers in the order the rows list them
        labels = {key: v for key, v in row["cell"].items() if key != "mode"}
        return peer_order.index(labels) if labels in peer_order else -1

    device = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU (Triton interpreter)"
    return {"rows": sorted(rows, key=declared), "device_name": device}


def table_keys(rows: list[dict]) -> list[tuple]:
    """(kernel, T, B) of every table row, in the order they were measured."""
    return list(dict.fromkeys((row["cell"]["kernel"], row["cell"]["seq_len"], row["cell"]["batch"])
                              for row in rows if "kernel" in row["cell"]))


def peers_of(rows: list[dict], kernel: str, seq_len: int, batch: int) -> dict[str, dict]:
    """{method: {"forward": s, "forward_backward": s} or {"error": why}} of one table row."""
    peers = {}
    for row in rows:
        cell = row["cell"]
        if (cell.get("kernel"), cell.get("seq_len"), cell.get("batch")) == (kernel, seq_len, batch):
            entry = peers.setdefault(cell["method"], {})
            entry.update({"error": row["error"]} if "error" in row else {cell["mode"]: row["seconds"]})
    return peers


def render(data: dict) -> str:
    config, rows = data["config"], data["rows"]
    head = ["kernel", "T", "B", "impl", "fwd ms", "fwd+bwd ms", "fwd vs best peer", "fwd+bwd vs best peer"]
    lines = []
    for kernel, seq_len, batch in table_keys(rows):
        peers = peers_of(rows, kernel, seq_len, batch)
        others = [timed for method, timed in peers.items() if method != OURS and "error" not in timed]
        for method, timed in peers.items():
            cells = [kernel, str(seq_len), str(batch), method]
            if "error" in timed:
                lines.append(cells + [timed["error"], "", "", ""])
                continue
            cells += [ms(timed[mode], 2) for mode in MODES]
            if method == OURS and others:
                cells += [f"{timed[mode] / min(o[mode] for o in others):.2f}x" for mode in MODES]
            else:
                cells += ["", ""]
            lines.append(cells)
    caption = (f"{data['device_name']}, {config['dtype']}, B*T = {config['tokens']}, best of {config['reps']} "
               "interleaved rounds; \"vs best peer\" is ours / the fastest other kernel of the row (the target: <= 1.2)")
    return f"{caption}\n\n{markdown_table(head, lines)}"


def summary(data: dict) -> list[SummaryRow]:
    """Ours against the fastest other library's kernel at the longest T, forward and forward+backward."""
    config, rows = data["config"], data["rows"]
    result = []
    for kernel, seq_len, batch in table_keys(rows):
        if seq_len != max(config["seq_lens"]):
            continue
        peers = peers_of(rows, kernel, seq_len, batch)
        for mode, label in zip(MODES, ("forward", "forward+backward")):
            result += against_best_peer(f"{kernel} {label} (GPU, {config['dtype']})", f"B{batch} H{config['heads']}, T {seq_len}",
                                        peers.get(OURS, {}).get(mode),
                                        {m: t.get(mode) for m, t in peers.items() if not m.startswith("ours")}, digits=2)
    return result


BENCHMARK = Benchmark(
    name="gpu_kernels", description="Our Triton kernels against the field's on a GPU (mLSTM, SWA; Gated DeltaNet's fla)",
    add_arguments=add_arguments, run=run, render=render, summary=summary, unavailable=unavailable,
    packages=("triton", "fla-core", "mlstm_kernels", "flash-attn"),
    smoke={"seq_lens": [32], "tokens": 32, "windows": [16], "heads": 2, "key_dim": 16, "value_dim": 32, "head_dim": 16},
)
