"""Launch configuration of the mLSTM Triton kernels: chunk length, tile widths, warps, dtypes."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ...common.backends import triton_interpreting
from ..reference import EPS

# Largest chunk the kernels take: (L, L) fp32 tiles per program; 128 already strains registers.
MAX_CHUNK = 128
# Before sm_90 (no wgmma) tl.dot's accumulators live in registers: at L = 128 every kernel spills
# kilobytes there in every dtype (tests/kernels/test_triton_targets.py), so chunks stop at 64.
MAX_CHUNK_BEFORE_SM90 = 64


def chunk_length(chunk_size: int, length: int, capability: int = 9) -> int:
    """The chunk length L the kernels use for a requested `chunk_size` and a sequence of T tokens,
    on a GPU of compute capability `capability` (the major version; 9 under the interpreter).

    tl.arange and tl.dot want a power of two >= 16, so chunk_size is rounded up to one and
    clamped to [16, MAX_CHUNK] (MAX_CHUNK_BEFORE_SM90 below sm_90); a short sequence takes the
    smallest such power covering it. The result does not depend on L beyond rounding, so this
    only changes speed.
    """
    largest = MAX_CHUNK if capability >= 9 else MAX_CHUNK_BEFORE_SM90
    wanted = min(max(triton.next_power_of_2(chunk_size), 16), largest)
    return min(wanted, max(16, triton.next_power_of_2(length)))


def tile_width(dim: int, cap: int, requested: int | None = None) -> int:
    """The tile width over a head dim of size `dim`: the dim padded to a power of two >= 16
    (tl.dot's smallest tile; masks hide the padding), at most `cap`, or `requested` if given."""
    width = min(max(16, triton.next_power_of_2(dim)), cap) if requested is None else requested
    if width < 16 or width & (width - 1):
        raise ValueError(f"mlstm: Triton block sizes must be powers of two >= 16, got {width}")
    return width


def kernel_dtypes(dtype: torch.dtype) -> dict:
    """The kernels' dtype constants for inputs of `dtype`: ACC (accumulators, states, gates), OP
    (what tl.dot operands are rounded to), DOT (the dtype tl.dot is given) and PRECISION.

    fp32 inputs use fp32-accurate products (not plain TF32) so the backend keeps fp32 accuracy;
    bf16/fp16 multiply in their own dtype with fp32 accumulation, as flash kernels do; fp64
    computes in fp64 throughout (the package's rule: states fp64 for fp64 inputs). Operands are
    cast `.to(OP).to(DOT)`: the Triton interpreter multiplies bf16 tiles as their raw uint16 bits,
    so under it bf16 operands are rounded to bf16 and multiplied in fp32 (the same products).
    """
    acc = tl.float64 if dtype == torch.float64 else tl.float32
    op = {torch.float64: tl.float64, torch.bfloat16: tl.bfloat16, torch.float16: tl.float16}.get(dtype, tl.float32)
    interpreting = triton_interpreting()
    dot = tl.float32 if op == tl.bfloat16 and interpreting else op
    # PRECISION only matters for fp32 operands: "ieee" is exact but runs on CUDA cores; "tf32x3"
    # (three TF32 tensor-core products, error ~1e-7 relative) keeps fp32 accuracy at MMA speed.
    return {"ACC": acc, "OP": op, "DOT": dot, "PRECISION": "ieee" if interpreting else "tf32x3"}


def launch_config(dtype: torch.dtype, key_dim: int, value_dim: int, L: int,
                  block_k: int | None = None, block_v: int | None = None, capability: int = 9) -> dict[str, dict]:
    """Each kernel's constexpr keyword arguments, num_warps included, by kernel, on a GPU of
    compute capability `capability` (the major version; 9 under the interpreter).

    Tile widths keep sm_90 builds at Dk = 128, Dv = 256, L = 64 in registers (bf16: no or little
    spilling):
      states, state_grads: (BK, BV) = (64, 64) state tiles, 4 warps; B*H*(Dk/64)*(Dv/64) programs
      outputs: BV = 64 output columns per program, looping over Dk in tiles of BK = 128, 8 warps
      chunk_grads: BK = 64 per program, looping over Dv in tiles of BV = 32, 8 warps
    The per-chunk kernels hold several (L, L) and (L, BK) fp32 tiles, hence 8 warps once those are
    (64, 64). fp64 halves the widths to stay within shared memory, and so does fp32 before sm_90,
    whose tf32x3 products (three per operand pair) spill heavily there at full width;
    there chunk_grads' Dv loop takes 16 columns in every dtype.
    block_k / block_v replace every Dk / Dv width (tests use 16 to exercise the tiling).
    """
    common = {"Dk": key_dim, "Dv": value_dim, "L": L, **kernel_dtypes(dtype)}
    scaled = {**common, "SCALE": key_dim**-0.5, "EPS": EPS}
    halved = dtype == torch.float64 or (dtype == torch.float32 and capability < 9)
    cap = (lambda width: max(16, width // 2)) if halved else (lambda width: width)
    state_k, state_v = tile_width(key_dim, cap(64), block_k), tile_width(value_dim, cap(64), block_v)
    # before sm_90 chunk_grads loops over Dv 16 columns at a time: wider, its 16-bit builds spill there
    value_loop = 32 if capability >= 9 else 16
    loop_k, loop_v = tile_width(key_dim, cap(128), block_k), tile_width(value_dim, cap(value_loop), block_v)
    warps = 8 if L * max(state_k, state_v) >= 64 * 64 else 4
    return {
        "states": {**common, "BK": state_k, "BV": state_v, "num_warps": 4},
        "outputs": {**scaled, "BK": loop_k, "BV": state_v, "NK": triton.cdiv(key_dim, loop_k), "num_warps": warps},
        "state_grads": {**scaled, "BK": state_k, "BV": state_v, "num_warps": 4},
        "chunk_grads": {
            **scaled, "BK": state_k, "BV": loop_v, "NV": triton.cdiv(value_dim, loop_v), "num_warps": warps,
        },
    }
