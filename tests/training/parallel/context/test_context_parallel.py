"""Context parallelism over 2 and 3 gloo processes (one torchrun launch each, worker.py) against one
process: logits, loss and every gradient, for every mixer alone and for the shipped tiny specs,
in rows and in packed sequences whose boundaries fall inside and across pieces, with pieces
shorter than SWA's window and the recurrent mixers' chunks; and three tiny specs sharded with FSDP2
over the same processes (no hang: the launch has a timeout)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module", params=[2, 3], ids=["2 ranks", "3 ranks"])
def report(request, tmp_path_factory) -> dict:
    """The worker's report.json: each case's largest difference, the bad inputs' messages, the warnings."""
    out = tmp_path_factory.mktemp(f"context{request.param}")
    worker = Path(__file__).with_name("worker.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(request.param),
               str(worker), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # a hang (a collective one rank never reaches) fails here rather than stalling CI
    done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


def test_every_mixer_and_tiny_spec_equals_one_process_in_fp64(report):
    fp64 = {case: worst for case, worst in report["cases"].items() if case.endswith("fp64")}
    assert len(fp64) == 2 * 8 + 7 + 3  # 7 mixers and a third party's, rows and packed; tiny specs; FSDP2
    assert {case: worst for case, worst in fp64.items() if not worst <= 1e-12} == {}


def test_fp32_is_within_its_tolerance(report):
    fp32 = {case: worst for case, worst in report["cases"].items() if case.endswith("fp32")}
    assert len(fp32) == 8
    assert {case: worst for case, worst in fp32.items() if not worst <= 1e-5} == {}


def test_a_mixer_without_an_exchange_passes_states_and_warns_once_in_one_line(report):
    assert report["warnings"] == ["ToyMixer declares no context exchange (register_exchange); passing states rank to "
                                  "rank: exact, but sequential"]


def test_bad_input_is_one_line(report):
    messages = report["bad_inputs"]
    assert set(messages) == {"context_size", "too_short"}
    assert "dividing the world size" in messages["context_size"]
    assert "needs at least" in messages["too_short"]
    assert all("\n" not in message for message in messages.values())
