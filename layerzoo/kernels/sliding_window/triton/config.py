"""Tile sizes, warps and pipeline stages for the three kernels.

On a GPU each kernel is autotuned over a short list, keyed on the padded head dim, the tensor
dtypes (added by the autotuner) and a power-of-two bucket of the window; configs that do not fit
(shared memory: fp32 tiles at D=128 are twice the bf16 ones) fail to compile and are dropped by
the autotuner, so every list ends in a small config that always fits. The lists follow
flash-attention-2 practice (forward: wide query tiles; dK/dV: wide key tiles, since each program
holds two fp32 (BLOCK_N, D) accumulators), and the autotuner picks among them. Every config is
compiled ahead of time for sm_80 and sm_90 by tests/kernels/test_triton_targets.py (shared memory
and spills, no timing), which holds that each list keeps one that fits and barely spills on both;
on sm_80 the widest dK/dV tiles spill, and the autotuner keeps one of them only if it still runs
fastest.

Under the Triton interpreter (CPU) one small fixed config runs instead: benchmarking configs there
would cost more than the tests, and 16/32-row tiles make short test sequences span several blocks. The two
tile sides differ on purpose, so an M/N mix-up in the block arithmetic cannot pass the tests.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

# The dtypes the kernels take (fp64 would need fp64 tensor-core dots: use sdpa or chunkwise).
TRITON_DTYPES = (torch.float32, torch.bfloat16, torch.float16)


class TileConfig(NamedTuple):
    """Query rows, key rows, warps and software-pipeline stages of one kernel launch."""

    block_m: int
    block_n: int
    num_warps: int = 4
    num_stages: int = 2


# Keys of the `blocks` override accepted by the launcher.
KERNELS = ("fwd", "dkdv", "dq")

INTERPRETER_CONFIGS: dict[str, TileConfig] = {
    "fwd": TileConfig(32, 16),
    "dkdv": TileConfig(16, 32),
    "dq": TileConfig(32, 16),
}

GPU_CONFIGS: dict[str, list[TileConfig]] = {
    "fwd": [
        TileConfig(128, 64, 8, 3),
        TileConfig(128, 128, 8, 3),
        TileConfig(128, 32, 8, 3),
        TileConfig(64, 64, 4, 3),
        TileConfig(64, 32, 4, 2),
    ],
    "dkdv": [
        TileConfig(32, 128, 8, 3),
        TileConfig(16, 128, 8, 2),
        TileConfig(32, 64, 4, 3),
        TileConfig(16, 64, 4, 2),
        TileConfig(32, 32, 4, 2),
    ],
    "dq": [
        TileConfig(128, 64, 8, 3),
        TileConfig(128, 32, 8, 3),
        TileConfig(64, 64, 8, 3),
        TileConfig(64, 32, 4, 3),
        TileConfig(32, 32, 4, 2),
    ],
}

# delta = rowsum(dO * O) is memory-bound and tiny: one fixed config.
DELTA_CONFIG = TileConfig(64, 16, 4, 1)


def tune_bucket(window: int) -> int:
    """Autotune key for a window: the next power of two, capped (wide windows tile alike)."""
    return min(1 << max(window - 1, 0).bit_length(), 8192)
