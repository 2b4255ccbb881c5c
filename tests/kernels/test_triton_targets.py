"""Every Triton kernel at every launch configuration the code can pick, compiled ahead of time for
sm_80 (A100) and sm_90 (H100, H200) on this CPU machine (tests/helpers/triton_targets.py): it
compiles, it fits the target's shared memory where nothing else would drop it, and it spills no
more than the bound for its dtype. The thorough profile compiles every dtype and more head dims
and chunk lengths."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import PROFILE

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton")

ARCHES = (80, 90)
# Shared memory one block may use (bytes): the CUDA programming guide's per-block opt-in maximum.
SHARED_LIMIT = {80: 163 * 1024, 90: 227 * 1024}
# Bytes of register spill stores a config may have: little in 16-bit (the dtypes that are fast on
# tensor cores, where a spill costs what the tiles save); fp32's tf32x3 products hold three
# operand tiles; fp64 runs on the slow fp64 units anyway (a correctness path, not a fast one).
SPILL_LIMIT = {"bf16": 2048, "fp16": 2048, "fp32": 8192, "fp64": 64 * 1024}


@pytest.fixture(scope="module")
def builds(tmp_path_factory) -> list[dict]:
    """What tests/helpers/triton_targets.py reports for every build, run without the interpreter."""
    out = tmp_path_factory.mktemp("triton-targets") / "builds.json"
    environment = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    command = [sys.executable, "-m", "tests.helpers.triton_targets", "--out", str(out),
               *(f"--arch={arch}" for arch in ARCHES), *(["--thorough"] if PROFILE == "thorough" else [])]
    done = subprocess.run(command, env=environment, cwd=Path(__file__).parents[2], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())


def fits(build: dict) -> bool:
    return build["shared"] <= SHARED_LIMIT[build["arch"]]


def runs_well(build: dict) -> bool:
    return fits(build) and build["spill_bytes"] <= SPILL_LIMIT[build["dtype"]]


def test_every_kernel_is_compiled_for_each_target(builds):
    kernels = {arch: {tuple(build["config"].split()[:2]) for build in builds if build["arch"] == arch} for arch in ARCHES}
    every = {("swa", "fwd"), ("swa", "dkdv"), ("swa", "dq"), ("swa", "delta"), ("mlstm", "states"),
             ("mlstm", "outputs"), ("mlstm", "state_grads"), ("mlstm", "chunk_grads")}
    assert all(found == every for found in kernels.values()), kernels


def test_every_config_compiles(builds):
    failed = [f"sm_{build['arch']} {build['config']}: {build['error']}" for build in builds if build["error"]]
    assert not failed, "\n".join(failed)


def test_a_config_launched_alone_fits_the_target_and_spills_within_its_bound(builds):
    """The mLSTM launch_config and the delta kernel are launched as chosen: nothing drops them."""
    bad = [f"sm_{build['arch']} {build['config']}: {build['shared']} bytes shared, {build['spill_bytes']} spilled"
           for build in builds if not build["autotuned"] and not runs_well(build)]
    assert not bad, "\n".join(bad)


def test_every_autotuned_choice_has_a_config_that_fits_and_spills_within_its_bound(builds):
    """The autotuner drops a config that runs out of shared memory and times the rest: it needs
    one left to pick that does not spill (a spilling one it may pick, but only if it is faster)."""
    good = defaultdict(bool)
    for build in builds:
        if build["autotuned"]:
            good[(build["arch"], build["choice"])] |= runs_well(build)
    assert good and all(good.values()), [f"sm_{arch} {choice}" for (arch, choice), ok in good.items() if not ok]
