"""Every Triton kernel of layerzoo at every launch configuration it can pick, compiled ahead of time
for a GPU target on a machine without one: its shared memory, registers and spills.

    python -m tests.helpers.triton_targets --arch 90 --arch 80 --out builds.json [--thorough]

Triton compiles for a target without its GPU (the `ptxas -v` of its build reports registers and spills); the
kernels must be the compiled kind, so this runs in a process without TRITON_INTERPRET (the tests
set it), in a pool of processes, one build each. The configurations are the ones the code picks:
the sliding-window kernels' autotuning lists (GPU_CONFIGS, DELTA_CONFIG) with the meta-parameters
_common_meta gives, and the mLSTM kernels' chunk_length and launch_config for the target's compute
capability (not the interpreter's).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import json
import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Iterator

import torch

TRITON_TYPES = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16", torch.float64: "fp64"}
# Pointers to tensors in the inputs' dtype; every other pointer (the SWA kernels' LSE and DELTA,
# the mLSTM kernels' other *_ptr) is in the compute dtype.
SWA_INPUTS = {"Q", "K", "V", "O", "DO", "DQ", "DK", "DV"}
SWA_POINTERS = SWA_INPUTS | {"LSE", "DELTA"}
SWA_FLOATS = {"qk_scale", "sm_scale"}
MLSTM_INPUTS = {"q_ptr", "k_ptr", "v_ptr", "h_ptr", "dh_ptr"}


@dataclass(frozen=True)
class Build:
    """One kernel at one configuration for one target, and what its compile reports.

    choice: the launches the code chooses among (an autotuning list's key), of which this is
    one config; autotuned: whether the autotuner chooses (and drops what does not fit) or the
    code launches this config alone.
    """

    config: str
    choice: str
    dtype: str
    autotuned: bool
    arch: int
    shared: int = 0
    registers: int = 0
    spill_bytes: int = 0
    error: str = ""


def signature(kernel: Any, dtype: torch.dtype, inputs: set[str], floats: set[str]) -> dict[str, str]:
    """Triton's signature of `kernel` for tensors of `dtype`: pointers, i32 sizes, fp32 scalars."""
    accumulator = TRITON_TYPES[torch.promote_types(dtype, torch.float32)]
    types = {}
    for parameter in kernel.params:
        name = parameter.name
        if parameter.is_constexpr:
            types[name] = "constexpr"
        elif name in inputs:
            types[name] = f"*{TRITON_TYPES[dtype]}"
        elif name.endswith("_ptr") or name in SWA_POINTERS:
            types[name] = f"*{accumulator}"
        else:
            types[name] = "fp32" if name in floats else "i32"
    return types


@dataclass(frozen=True)
class Launch:
    """A kernel at one configuration the code can launch: Build's fields, and what to compile."""

    config: str
    choice: str
    dtype: torch.dtype
    autotuned: bool
    kernel: Any
    signature: dict
    constexprs: dict
    options: dict


def sliding_window_launches(thorough: bool) -> Iterator[Launch]:
    """Every config of the SWA kernels' autotuning lists, and the delta kernel's one."""
    from layerzoo.kernels.sliding_window.triton import backward, forward
    from layerzoo.kernels.sliding_window.triton.config import DELTA_CONFIG, GPU_CONFIGS

    kernels = {"fwd": forward.swa_fwd_kernel, "dkdv": backward.swa_bwd_dkdv_kernel, "dq": backward.swa_bwd_dq_kernel}
    # the quick set: bf16, the dtype a GPU trains in, at the largest head dim the kernels tile
    dtypes = (torch.float32, torch.bfloat16, torch.float16) if thorough else (torch.bfloat16,)
    for dtype in dtypes:
        for dim in ((64, 128) if thorough else (128,)):
            meta = {"BLOCK_D": dim, "EVEN_D": True, "UPCAST": False,
                    "PRECISION": "tf32x3" if dtype == torch.float32 else "tf32"}
            for name, kernel in kernels.items():
                for group in ((1, 2) if name == "dkdv" else (1,)):
                    choice = f"swa {name} {TRITON_TYPES[dtype]} D={dim} GROUP={group}"
                    for tiles in GPU_CONFIGS[name]:
                        constexprs = {**meta, "GROUP": group, "BLOCK_M": tiles.block_m, "BLOCK_N": tiles.block_n}
                        options = {"num_warps": tiles.num_warps, "num_stages": tiles.num_stages}
                        yield Launch(f"{choice} {tiles.block_m}x{tiles.block_n} {options}", choice, dtype, True, kernel,
                                     signature(kernel, dtype, SWA_INPUTS, SWA_FLOATS), constexprs, options)
            delta = backward.swa_bwd_delta_kernel
            choice = f"swa delta {TRITON_TYPES[dtype]} D={dim}"
            yield Launch(choice, choice, dtype, False, delta, signature(delta, dtype, SWA_INPUTS, SWA_FLOATS),
                         {"BLOCK_M": DELTA_CONFIG.block_m, "BLOCK_D": dim, "EVEN_D": True},
                         {"num_warps": DELTA_CONFIG.num_warps, "num_stages": DELTA_CONFIG.num_stages})


def mlstm_launches(thorough: bool, arch: int) -> Iterator[Launch]:
    """The mLSTM kernels as chunk_length and launch_config pick them on a GPU of sm_<arch>, at the
    head dims of xLSTM-7B (and smaller ones with thorough), at the default chunk size and the
    largest (each chunk length once: before sm_90 the largest is the default)."""
    from unittest import mock

    from layerzoo.kernels.mlstm.triton import backward, config, forward

    kernels = {"states": forward.chunk_states_kernel, "outputs": forward.chunk_outputs_kernel,
               "state_grads": backward.state_grads_kernel, "chunk_grads": backward.chunk_grads_kernel}
    flags = {"states": {"HAS_INITIAL": True}, "state_grads": {"HAS_FINAL_GRAD": True}}
    # the quick set: bf16, and fp64 (the most shared memory), at xLSTM-7B's head dims
    dtypes = (torch.float32, torch.bfloat16, torch.float16, torch.float64) if thorough else (
        torch.bfloat16, torch.float64)
    shapes = ((128, 256), (64, 64)) if thorough else ((128, 256),)
    capability = arch // 10
    lengths = sorted({config.chunk_length(chunk, 1 << 20, capability) for chunk in (16, 64, 128)
                      if thorough or chunk != 16})
    with mock.patch.object(config, "triton_interpreting", lambda: False):
        for dtype in dtypes:
            for key_dim, value_dim in shapes:
                for chunk in lengths:
                    launch = config.launch_config(dtype, key_dim, value_dim, chunk, capability=capability)
                    for name, kernel in kernels.items():
                        constexprs = {key: value for key, value in launch[name].items() if key != "num_warps"}
                        constexprs |= flags.get(name, {})
                        label = f"mlstm {name} {TRITON_TYPES[dtype]} Dk={key_dim} Dv={value_dim} L={chunk}"
                        yield Launch(label, label, dtype, False, kernel, signature(kernel, dtype, MLSTM_INPUTS, set()),
                                     constexprs, {"num_warps": launch[name]["num_warps"], "num_stages": 1})


def compile_one(job: tuple) -> Build:
    """Compile one launch (its kernel named by module and attribute) for sm_<arch>: what the ptxas
    run of Triton's own build reports (its flags are the ones a GPU build uses)."""
    import importlib

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    fields, module, attribute, types, constexprs, options, arch = job
    kernel = getattr(importlib.import_module(module), attribute)
    names = [parameter.name for parameter in kernel.params]
    log = io.StringIO()
    # a cached build would run no ptxas, so none is used; the log is printed, so it is captured
    with knobs.compilation.scope(), knobs.nvidia.scope(), contextlib.redirect_stdout(log):
        knobs.compilation.always_compile = True
        knobs.nvidia.dump_ptxas_log = True
        try:
            source = ASTSource(fn=kernel, signature=types,
                               constexprs={(names.index(k),): v for k, v in constexprs.items()})
            compiled = triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
        except Exception as error:  # a config that does not compile is a finding, reported as such
            return Build(**fields, arch=arch, error=f"{type(error).__name__}: {str(error).splitlines()[0][:200]}")
    registers, spills = ptxas_usage(log.getvalue())
    return Build(**fields, arch=arch, shared=compiled.metadata.shared, registers=registers, spill_bytes=spills)


def ptxas_usage(report: str) -> tuple[int, int]:
    """(registers, bytes of spill stores) in a `ptxas -v` report."""
    registers = max(map(int, re.findall(r"Used (\d+) registers", report)), default=0)
    spills = sum(map(int, re.findall(r"(\d+) bytes spill stores", report)))
    return registers, spills


def jobs(arches: list[int], thorough: bool) -> list[tuple]:
    """compile_one's arguments for every launch on every target."""
    return [({"config": launch.config, "choice": launch.choice, "dtype": TRITON_TYPES[launch.dtype],
              "autotuned": launch.autotuned}, launch.kernel.fn.__module__, launch.kernel.fn.__name__,
             launch.signature, launch.constexprs, launch.options, arch)
            for arch in arches for launch in (*sliding_window_launches(thorough), *mlstm_launches(thorough, arch))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", type=int, action="append", required=True, help="a compute capability: 80, 90")
    parser.add_argument("--out", required=True, help="the JSON file of the builds")
    parser.add_argument("--thorough", action="store_true", help="every dtype and more head dims and chunk lengths")
    args = parser.parse_args()
    if os.environ.get("TRITON_INTERPRET") == "1":
        parser.error("run without TRITON_INTERPRET: the kernels must be the compiled kind")
    with concurrent.futures.ProcessPoolExecutor(os.cpu_count()) as pool:
        builds = list(pool.map(compile_one, jobs(args.arch, args.thorough)))
    with open(args.out, "w") as file:
        json.dump([asdict(build) for build in builds], file, indent=1)


if __name__ == "__main__":
    main()
