"""GPU kernel table: our Triton kernels against the field's, forward and forward+backward.

    python benchmarks/gpu_kernels.py                          # CUDA, bf16, T = 2k, 8k, 32k at 64k tokens
    python benchmarks/gpu_kernels.py --json gpu.json
    TRITON_INTERPRET=1 python benchmarks/gpu_kernels.py --smoke   # CPU: every row runs, tiny shapes

Rows (B * T = --tokens, so every row does the same work per token):
- mLSTM, H=16, Dk=128, Dv=256: ours (backend "triton") vs mlstm_kernels' TFLA Triton kernel
  (when installed) vs our PyTorch chunkwise backend;
- SWA, window 128 and 2048, H=16, D=128: ours (backend "triton") vs FlexAttention with a
  sliding-window block mask (our "flex" backend) vs flash-attn's window (when installed);
- Gated DeltaNet, H=16, K=128, V=256, through flash-linear-attention (our "fla" backend), for
  reference: it is the maintained kernel we keep.

Each cell is the fastest of a few runs. "vs best peer" is ours / the fastest other kernel of the
row (the target is <= 1.2). A peer that is missing or fails is shown as such, never silently
dropped. --smoke shrinks every shape so that the script itself can be checked on a CPU through the
Triton interpreter (peers that need CUDA are then reported as unavailable).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from layerzoo.kernels import gated_delta_rule, mlstm, sliding_window_attention  # noqa: E402

from common import markdown_table, timed_runs  # noqa: E402

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

# A kernel under test, called on the row's inputs. Rows map each peer's name to (runner, "") or,
# when it cannot run here, (None, why not).
Runner = Callable[..., torch.Tensor]


def mlstm_inputs(batch, length, heads, key_dim, value_dim, dtype, device):
    """q, k (B, T, H, Dk), v (B, T, H, Dv), gates i, f (B, T, H): typical trained-model ranges."""
    gen = torch.Generator().manual_seed(0)
    q, k = (torch.randn(batch, length, heads, key_dim, generator=gen) for _ in range(2))
    v = torch.randn(batch, length, heads, value_dim, generator=gen)
    i = torch.randn(batch, length, heads, generator=gen)
    f = 3 + torch.randn(batch, length, heads, generator=gen)
    return [t.to(device, dtype if t.dim() == 4 else torch.float32) for t in (q, k, v, i, f)]


def tfla_runner() -> tuple[Runner | None, str]:
    """mlstm_kernels' TFLA kernel in our layout, or None and why not."""
    try:
        from mlstm_kernels.torch.chunkwise.triton_xl_chunk import mlstm_chunkwise__xl_chunk
    except ImportError as error:
        return None, f"mlstm_kernels not installed ({error.name})"

    def run(q, k, v, i, f):
        # TFLA lays tensors out (B, H, T, D); the transposes are part of what a caller pays.
        out = mlstm_chunkwise__xl_chunk(*(t.transpose(1, 2) for t in (q, k, v, i, f)), chunk_size=128)
        return out.transpose(1, 2)

    return run, ""


def flash_attn_runner(window: int) -> tuple[Runner | None, str]:
    try:
        from flash_attn import flash_attn_func
    except ImportError:
        return None, "flash-attn not installed"
    return (lambda q, k, v: flash_attn_func(q, k, v, causal=True, window_size=(window - 1, 0))), ""


def time_ms(args, fn: Runner, inputs: list[torch.Tensor]) -> tuple[float, float]:
    """Best forward and forward+backward milliseconds of fn(*inputs)."""
    def best(call) -> float:
        return min(timed_runs(call, args.device, reps=args.reps, budget=args.budget, warmup=args.warmup)) * 1e3

    with torch.no_grad():
        forward = best(lambda: fn(*inputs))
    leaves = [t.detach().requires_grad_(t.is_floating_point()) for t in inputs]
    grad = torch.randn_like(fn(*leaves))

    def forward_backward():
        fn(*leaves).backward(grad)
        for t in leaves:
            t.grad = None

    return forward, best(forward_backward)


def measure(args, peers: dict[str, tuple[Runner | None, str]], inputs) -> dict[str, dict]:
    cells = {}
    for name, (fn, why_not) in peers.items():
        if fn is None:
            cells[name] = {"error": why_not}
            continue
        try:
            forward, both = time_ms(args, fn, inputs)
            cells[name] = {"forward_ms": forward, "forward_backward_ms": both}
        except Exception as error:  # a peer that fails on this machine is reported, not fatal
            cells[name] = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:80]}"}
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    return cells


def rows(args) -> list[dict]:
    dtype = DTYPES[args.dtype]
    tokens = args.tokens
    heads, key_dim, value_dim, head_dim = (2, 16, 32, 16) if args.smoke else (16, 128, 256, 128)
    out = []
    for length in args.seq_lens:
        batch = max(1, tokens // length)
        inputs = mlstm_inputs(batch, length, heads, key_dim, value_dim, dtype, args.device)
        peers = {
            "ours (triton)": (lambda *x: mlstm(*x, backend="triton"), ""),
            "mlstm_kernels TFLA": tfla_runner(),
            "ours (PyTorch chunkwise)": (lambda *x: mlstm(*x, backend="chunkwise"), ""),
        }
        out.append({"kernel": "mLSTM", "T": length, "B": batch, **measure(args, peers, inputs)})
        print(f"mLSTM T={length} done", file=sys.stderr, flush=True)

        for window in args.windows:
            gen = torch.Generator().manual_seed(0)
            qkv = [torch.randn(batch, length, heads, head_dim, generator=gen).to(args.device, dtype) for _ in range(3)]
            fa = flash_attn_runner(window)
            peers = {
                "ours (triton)": (lambda q, k, v, w=window: sliding_window_attention(q, k, v, w, backend="triton"), ""),
                "FlexAttention": (
                    (lambda q, k, v, w=window: sliding_window_attention(q, k, v, w, backend="flex"), "")
                    if args.device.startswith("cuda") else (None, "needs CUDA")),
                "flash-attn": fa,
            }
            out.append({"kernel": f"SWA w={window}", "T": length, "B": batch, **measure(args, peers, qkv)})
            print(f"SWA w={window} T={length} done", file=sys.stderr, flush=True)

        gen = torch.Generator().manual_seed(0)
        q = torch.randn(batch, length, heads, key_dim, generator=gen)
        k = F.normalize(torch.randn(batch, length, heads, key_dim, generator=gen), dim=-1)
        v = torch.randn(batch, length, heads, value_dim, generator=gen)
        g = F.logsigmoid(torch.randn(batch, length, heads, generator=gen) + 2)
        beta = torch.rand(batch, length, heads, generator=gen)
        gdn = [t.to(args.device, dtype) for t in (q, k, v)] + [t.to(args.device) for t in (g, beta)]
        peers = {"fla": ((lambda *x: gated_delta_rule(*x, backend="fla"), "")
                         if args.device.startswith("cuda") else (None, "needs CUDA"))}
        out.append({"kernel": "Gated DeltaNet", "T": length, "B": batch, **measure(args, peers, gdn)})
    return out


def markdown(table_rows: list[dict]) -> str:
    head = ["kernel", "T", "B", "impl", "fwd ms", "fwd+bwd ms", "fwd vs best peer", "fwd+bwd vs best peer"]
    lines = []
    for row in table_rows:
        impls = {k: v for k, v in row.items() if isinstance(v, dict)}
        ours = impls.get("ours (triton)")
        others = [v for k, v in impls.items() if k != "ours (triton)" and "error" not in v]
        for name, cell in impls.items():
            cells = [row["kernel"], str(row["T"]), str(row["B"]), name]
            if "error" in cell:
                lines.append(cells + [cell["error"], "", "", ""])
                continue
            cells += [f"{cell['forward_ms']:.2f}", f"{cell['forward_backward_ms']:.2f}"]
            if cell is ours and others and "error" not in ours:
                for key in ("forward_ms", "forward_backward_ms"):
                    cells.append(f"{ours[key] / min(o[key] for o in others):.2f}x")
            else:
                cells += ["", ""]
            lines.append(cells)
    return markdown_table(head, lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seq-lens", type=int, nargs="+", default=[2048, 8192, 32768])
    parser.add_argument("--tokens", type=int, default=65536, help="B * T of every row")
    parser.add_argument("--windows", type=int, nargs="+", default=[128, 2048])
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--reps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--budget", type=float, default=2.0, help="stop after 3 runs past this many seconds")
    parser.add_argument("--smoke", action="store_true", help="tiny shapes, to check the script on a CPU")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.smoke:
        args.seq_lens, args.tokens, args.windows = [32, 64], 64, [16]
        args.reps, args.warmup, args.budget = 1, 0, 0.0
    elif not args.device.startswith("cuda"):
        parser.error("the full table needs a CUDA device; use --smoke to check the script on a CPU")

    table_rows = rows(args)
    name = torch.cuda.get_device_name() if args.device.startswith("cuda") else "CPU (Triton interpreter)"
    print(f"{name}, {args.dtype}, B*T = {args.tokens}, torch {torch.__version__}")
    print()
    print(markdown(table_rows))
    if args.json:
        args.json.write_text(json.dumps({"device": name, "config": vars(args), "rows": table_rows}, indent=2, default=str))


if __name__ == "__main__":
    main()
