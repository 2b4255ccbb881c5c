"""Context parallelism over 2 and 3 gloo processes (one torchrun launch each, worker.py) against one
process: logits, loss and every gradient, for every mixer alone and for the shipped tiny specs,
in rows and in packed sequences whose boundaries fall inside and across pieces, with pieces
shorter than SWA's window and the recurrent mixers' chunks; full attention with its work balanced
over the ranks; and three tiny specs sharded with FSDP2
over the same processes; and context 2 x data 2 on 4 processes under DDP and FSDP2; every mixer on
flash-linear-attention's packed layouts with 2 and 4 (no hang: each launch has a timeout)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from layerzoo.registry import list_mixers

REPO = Path(__file__).resolve().parents[4]


def launch(worker: str, processes: int, out: Path) -> dict:
    """Run `worker` under torchrun on `processes` gloo processes: its report.json."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(processes),
               str(Path(__file__).with_name(worker)), str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    # a hang (a collective one rank never reaches) fails here rather than stalling CI
    done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads((out / "report.json").read_text())


@pytest.fixture(scope="module", params=[2, 3], ids=["2 ranks", "3 ranks"])
def report(request, tmp_path_factory) -> dict:
    """worker.py's report: each case's largest difference, the bad inputs' messages, the warnings."""
    return launch("worker.py", request.param, tmp_path_factory.mktemp(f"context{request.param}"))


def test_every_mixer_and_tiny_spec_equals_one_process_in_fp64(report):
    fp64 = {case: worst for case, worst in report["cases"].items() if case.endswith("fp64")}
    assert len(fp64) == 2 * 8 + 7 + 3 + 6  # 7 mixers and a third party's, rows and packed; tiny specs; FSDP2;
    # full attention balanced over the ranks, alone, in a tiny spec and its KV cache, in rows and packed
    assert {case: worst for case, worst in fp64.items() if not worst <= 1e-12} == {}


def test_fp32_is_within_its_tolerance(report):
    fp32 = {case: worst for case, worst in report["cases"].items() if case.endswith("fp32")}
    assert len(fp32) == 8 + 2  # and full attention balanced, in rows and packed
    assert {case: worst for case, worst in fp32.items() if not worst <= 1e-5} == {}


def test_a_mixer_without_an_exchange_passes_states_and_warns_once_in_one_line(report):
    assert [w for w in report["warnings"] if "exchange" in w] == ["ToyMixer declares no context exchange (register_exchange); passing states rank to "
                                  "rank: exact, but sequential"]


def test_bad_input_is_one_line(report):
    messages = report["bad_inputs"]
    assert set(messages) == {"context_size", "too_short"}
    assert "dividing the world size" in messages["context_size"]
    assert "needs at least" in messages["too_short"]
    assert all("\n" not in message for message in messages.values())


def test_context_times_data_parallel_equals_one_process_on_the_global_batch(tmp_path):
    cases = launch("data_worker.py", 4, tmp_path)
    assert set(cases) == {f"{name}/{wrap}" for name in ("swax-gdn-tiny", "xlstm-tiny") for wrap in ("ddp", "fsdp")}
    assert {case: worst for case, worst in cases.items() if not worst <= 1e-12} == {}


@pytest.mark.parametrize("processes", [2, 4], ids=["2 ranks", "4 ranks"])
def test_every_mixer_equals_one_process_on_fla_s_packed_layouts(processes, tmp_path):
    """flash-linear-attention's context-parallel layouts (layouts_worker.py): one-token tails,
    boundaries on the pieces' edges, a sequence over three pieces."""
    cases = launch("layouts_worker.py", processes, tmp_path)
    assert len(cases) == 12 * (len(list_mixers()) + 1)  # full attention contiguous and balanced
    assert {case: worst for case, worst in cases.items() if not worst <= 1e-12} == {}
