"""mLSTM kernels: the step loop (backend "reference"), layerzoo's chunkwise form and mlstm_kernels' chunkwise.

    python benchmarks/mlstm.py                      # CPU, fp32, T = 1024 ... 16384, torch's threads
    python benchmarks/mlstm.py --seq-lens 4096 --json mlstm.json

Prints a markdown table of the best forward and forward+backward time of each backend, the
chunkwise/reference speedup, and the chunkwise kernels' achieved matmul GFLOP/s as a fraction of a
large torch.matmul measured in the same run. On CPU, "chunkwise" runs its forward compiled
(cpu_forward.cpp; forward+backward runs PyTorch, as autograd records it) and `chunkwise_torch` is
the same kernel in PyTorch throughout (LAYERZOO_NATIVE=0: what runs where no C++ compiler is).
mlstm_kernels (NX-AI) runs when it is installed; it is not a layerzoo dependency. Each timed run
backpropagates a dense random gradient of h.

On Linux the script re-runs itself with glibc told to keep freed memory (MALLOC_* below): on
some VMs the page faults of every fresh large buffer cost more than the arithmetic on it, and
that hits the chunkwise kernel's (L, L) blocks, not the step loop's small tensors.
--no-keep-memory measures with the allocator's defaults.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from unittest import mock

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerzoo.kernels import mlstm  # noqa: E402
from layerzoo.kernels.mlstm.native import COMPILED  # noqa: E402

from common import (  # noqa: E402
    add_chunkwise_shape_arguments, markdown_table, scaling_exponent, sweep_best_times, sweep_parser,
)

try:  # not a dependency: compared when installed
    from mlstm_kernels.torch.chunkwise.native import mlstm_chunkwise__native_autograd
except ImportError:
    mlstm_chunkwise__native_autograd = None

DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
KEEP_MEMORY = {"MALLOC_MMAP_THRESHOLD_": str(2**32), "MALLOC_TRIM_THRESHOLD_": str(2**34)}
SPEEDUP_AT = 4096
# the chunkwise kernels whose matmul rate the table shows
CHUNKWISE = ("chunkwise", "chunkwise_torch")


def make_inputs(args, seq_len: int, requires_grad: bool, heads_first: bool = False):
    """q, k (B, T, H, Dk), v (B, T, H, Dv), gates i, f (B, T, H); (B, H, T, ...) if heads_first."""
    gen = torch.Generator().manual_seed(0)
    shape = (args.batch, seq_len, args.heads)
    tensors = [
        torch.randn(*shape, args.key_dim, generator=gen),
        torch.randn(*shape, args.key_dim, generator=gen),
        torch.randn(*shape, args.value_dim, generator=gen),
        torch.randn(shape, generator=gen),
        3 + torch.randn(shape, generator=gen),  # forget gates near sigmoid(3), as at init
    ]
    if heads_first:
        tensors = [t.transpose(1, 2).contiguous() for t in tensors]
    dtype = DTYPES[args.dtype]
    return [t.to(args.device, dtype if t.dim() == 4 else torch.float32).requires_grad_(requires_grad) for t in tensors]


def kernel(args, backend: str):
    """(q, k, v, i, f) -> h, in the layout make_inputs gives for this backend."""
    if backend == "mlstm_kernels":
        return lambda *inputs: mlstm_chunkwise__native_autograd(*inputs, chunk_size=args.chunk_size)
    return lambda *inputs: mlstm(*inputs, chunk_size=args.chunk_size, backend=backend.removesuffix("_torch"))


def runners(args, backend: str, seq_len: int) -> dict:
    """{"forward": fn, "forward_backward": fn}: closures over this cell's inputs, run to time."""
    fn = kernel(args, backend)
    heads_first = backend == "mlstm_kernels"
    inputs = make_inputs(args, seq_len, requires_grad=False, heads_first=heads_first)
    leaves = make_inputs(args, seq_len, requires_grad=True, heads_first=heads_first)
    grad_h = torch.randn_like(fn(*inputs))
    # chunkwise_torch: the chunkwise kernel with the compiled CPU forward turned off
    implementation = contextlib.nullcontext()
    if backend == "chunkwise_torch":
        implementation = mock.patch.dict(os.environ, {"LAYERZOO_NATIVE": "0"})

    @torch.no_grad()
    def forward():
        with implementation:
            fn(*inputs)

    def forward_backward():
        with implementation:
            fn(*leaves).backward(grad_h)
        for t in leaves:
            t.grad = None

    return {"forward": forward, "forward_backward": forward_backward}


def chunkwise_matmul_flops(args, seq_len: int) -> int:
    """Multiply-adds x 2 of the chunkwise forward's matmuls, as executed (full (L, L) blocks).

    Per token and head, chunk L = min(chunk_size, T): q k^T (2 L Dk), scores @ [v, 1]
    (2 L (Dv + 1)), q @ [C, n] and the chunk's own k^T [v, 1] (2 Dk (Dv + 1) each).
    """
    chunk, dk, dv = min(args.chunk_size, seq_len), args.key_dim, args.value_dim + 1
    return args.batch * args.heads * seq_len * (2 * chunk * dk + 2 * chunk * dv + 4 * dk * dv)


def measure(args, backends: list[str]) -> tuple[list[dict], float]:
    """One row per T with each backend's best times (None where skipped), and the matmul GFLOP/s."""
    times, peak = sweep_best_times(args, backends, runners)
    rows = []
    for seq_len in args.seq_lens:
        row = {"seq_len": seq_len, **{backend: times[seq_len, backend] for backend in backends}}
        for key in ("forward", "forward_backward"):
            row[f"speedup_{key}"] = row["reference"] and row["reference"][f"{key}_s"] / row["chunkwise"][f"{key}_s"]
        for backend in CHUNKWISE:
            if backend in backends:
                row[f"{backend}_gflops"] = chunkwise_matmul_flops(args, seq_len) / row[backend]["forward_s"] / 1e9
                row[f"{backend}_fraction_of_matmul"] = row[f"{backend}_gflops"] / peak
        rows.append(row)
    return rows, peak


def ms(result: dict | None, key: str) -> str:
    return "skipped" if result is None else f"{result[key] * 1e3:.1f}"


def markdown(rows: list[dict], backends: list[str]) -> str:
    head = ["T"] + [f"{b} fwd ms" for b in backends] + [f"{b} fwd+bwd ms" for b in backends]
    chunkwise = [b for b in CHUNKWISE if b in backends]
    head += ["speedup fwd", "speedup fwd+bwd"] + [f"{b} GFLOP/s (of matmul)" for b in chunkwise]
    head += ["chunkwise fwd ms / 1k tokens"]
    table = []
    for r in rows:
        cells = [str(r["seq_len"])]
        cells += [ms(r[b], "forward_s") for b in backends]
        cells += [ms(r[b], "forward_backward_s") for b in backends]
        cells += [f"{r[k]:.0f}x" if r[k] else "—" for k in ("speedup_forward", "speedup_forward_backward")]
        cells += [f"{r[f'{b}_gflops']:.1f} ({r[f'{b}_fraction_of_matmul']:.0%})" for b in chunkwise]
        cells += [f"{r['chunkwise']['forward_s'] * 1e6 / r['seq_len']:.2f}"]
        table.append(cells)
    return markdown_table(head, table)


def main() -> None:
    parser = sweep_parser(__doc__)
    add_chunkwise_shape_arguments(parser)
    parser.add_argument("--dtype", choices=DTYPES, default="fp32", help="of q, k, v (gates stay fp32)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0,
                        help="intra-op threads (default 0: torch's default, as the Gated DeltaNet benchmark; the "
                        "chunkwise kernels' batched matmuls use every core, the step loop gains nothing from them)")
    parser.add_argument("--reference-max-len", type=int, default=SPEEDUP_AT,
                        help="skip the step loop above this T (its backward takes ~2.5 ms per token)")
    parser.add_argument("--reps", type=int, default=7, help="rounds of timed runs (best of them)")
    parser.add_argument("--budget", type=float, default=10.0, help="a cell stops repeating after this many seconds")
    parser.add_argument("--no-keep-memory", dest="keep_memory", action="store_false",
                        help="leave glibc's malloc settings alone")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()

    if args.keep_memory and sys.platform == "linux" and any(os.environ.get(k) != v for k, v in KEEP_MEMORY.items()):
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, **KEEP_MEMORY})
    if args.threads:
        torch.set_num_threads(args.threads)

    backends = ["reference", "chunkwise"]
    backends += ["chunkwise_torch"] if args.device == "cpu" and COMPILED.load() is not None else []
    backends += ["mlstm_kernels"] if mlstm_chunkwise__native_autograd else []
    rows, peak = measure(args, backends)

    seq_lens = [r["seq_len"] for r in rows]
    summary = {
        "matmul_gflops": peak,
        **{f"growth_exponent_{key}": scaling_exponent(seq_lens, [r["chunkwise"][f"{key}_s"] for r in rows])
           for key in ("forward", "forward_backward")},
        f"speedup_at_{SPEEDUP_AT}": next(
            ({k: r[f"speedup_{k}"] for k in ("forward", "forward_backward")} for r in rows if r["seq_len"] == SPEEDUP_AT and r["reference"]),
            None,
        ),
    }
    keep = "kept by glibc" if os.environ.get("MALLOC_MMAP_THRESHOLD_") == KEEP_MEMORY["MALLOC_MMAP_THRESHOLD_"] else "allocator defaults"
    print(
        f"mLSTM, B={args.batch}, H={args.heads}, Dk={args.key_dim}, Dv={args.value_dim}, chunk {args.chunk_size}, "
        f"{args.dtype}, {args.device}, {torch.get_num_threads()} thread(s), freed memory {keep}; best of up to "
        f"{args.reps} interleaved runs; speedup = reference / chunkwise; GFLOP/s = chunkwise forward matmul work / time"
    )
    print()
    print(markdown(rows, backends))
    print()
    print(f"fp32 matmul (2048^3) on this machine: {peak:.1f} GFLOP/s")
    if summary[f"speedup_at_{SPEEDUP_AT}"]:
        speedup = summary[f"speedup_at_{SPEEDUP_AT}"]
        print(f"speedup at T={SPEEDUP_AT}: forward {speedup['forward']:.0f}x, forward+backward "
              f"{speedup['forward_backward']:.0f}x (target >= 20x)")
    if summary["growth_exponent_forward"] is not None:
        print(f"chunkwise time ~ T^e with e = {summary['growth_exponent_forward']:.2f} (forward), "
              f"{summary['growth_exponent_forward_backward']:.2f} (forward+backward); 1.00 is linear")
    skipped = [r["seq_len"] for r in rows if r["reference"] is None]
    if skipped:
        print(f"reference skipped at T = {', '.join(map(str, skipped))} (above --reference-max-len {args.reference_max_len})")
    if args.json:
        config = {k: v for k, v in vars(args).items() if k != "json"}
        args.json.write_text(json.dumps({"config": config, "torch": torch.__version__, "summary": summary, "rows": rows}, indent=2))


if __name__ == "__main__":
    main()
