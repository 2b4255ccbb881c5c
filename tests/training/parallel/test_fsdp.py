"""FSDP2 over two gloo processes (one torchrun launch, fsdp_worker.py) against one process.

The causal LM and ARMT train with `training.parallel: fsdp` on a global batch of 8 in two
micro-batches per rank, as the DDP test does, and match one process with the same global batch.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from layerzoo.training import train
from tests.helpers.run_checks import assert_same_final_state, metric_records
from tests.helpers.tiny import TINY
from tests.training.parallel.fsdp_worker import PACKED

# The shared tiny spec in 4 steps, and ARMT around the same stack.
SPEC = TINY.replace("steps: 6", "steps: 4")
ARMT = SPEC + "armt: {segment_size: 8, num_mem_tokens: 2, d_mem: 16, memory_layers: [0, 1]}\n"


@pytest.fixture(scope="module")
def fsdp(tmp_path_factory):
    """The worker's folder: report.json and the run folders of its FSDP training runs."""
    out = tmp_path_factory.mktemp("fsdp")
    for name, text in (("spec.yaml", SPEC), ("armt.yaml", ARMT)):
        (out / name).write_text(text)
    worker = Path(__file__).with_name("fsdp_worker.py")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(worker),
               str(out), str(out / "spec.yaml"), str(out / "armt.yaml")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=out, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def report(fsdp) -> dict:
    return json.loads((fsdp / "report.json").read_text())


def losses(run_dir) -> list[float]:
    """Each step's loss and gradient norm, in turn."""
    return [r[key] for r in metric_records(run_dir) if "loss" in r for key in ("loss", "grad_norm")]


def test_a_sharded_build_holds_a_normal_builds_weights_to_the_bit(fsdp):
    """Built on the meta device, sharded, then filled: gathered, every parameter and buffer equals
    a normal build's with the same seed (uneven shards, untied head, every mixer, ARMT)."""
    assert report(fsdp)["build"] == {"mixed": [], "armt": []}


@pytest.fixture
def one_thread():
    """One thread, as each rank has: on a busy 2-core machine a second thread slows these tiny
    matmuls tens of times over (it waits for a core)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.parametrize(("name", "run", "overrides"), [("spec", "causal", []), ("armt", "armt", []),
                                                       ("armt", "armt-packed", PACKED)])
def test_fsdp_training_matches_one_process(fsdp, tmp_path, name, run, overrides, one_thread):
    """ARMT on packed rows: each rank runs its own number of segments, and still no rank waits forever."""
    one = train(fsdp / f"{name}.yaml", ["training.checkpoint_every=2", *overrides], run_dir=tmp_path / "one",
                progress=False)
    sharded = losses(fsdp / run)
    assert len(sharded) == 2 * 4
    assert sharded == pytest.approx(losses(one.run_dir), rel=1e-4, abs=1e-5)


def test_an_fsdp_run_resumes_bit_exactly(fsdp):
    """The ARMT run resumed under FSDP from its step-2 checkpoint ends as the uninterrupted run."""
    assert_same_final_state(fsdp / "armt-resumed", fsdp / "armt")


def test_bf16_mixed_precision_computes_in_bf16_and_keeps_fp32_weights(fsdp):
    for name, seen in report(fsdp)["mixed_precision"].items():
        assert seen == {"compute": "torch.bfloat16", "logits": "torch.bfloat16", "weights": "torch.float32",
                        "gradients": "torch.float32", "finite": True}, name
    assert losses(fsdp / "causal-bf16")[::2] == pytest.approx(losses(fsdp / "causal")[::2], rel=1e-2)


def test_evaluation_with_uneven_shares_of_examples_matches_one_process(fsdp):
    sharded, one = report(fsdp)["evaluation"]
    assert sharded == pytest.approx(one, rel=1e-5)


def test_fsdp_around_a_hugging_face_model(fsdp):
    difference = report(fsdp)["hugging_face"]
    if difference is None:
        pytest.skip("transformers is not installed")
    assert difference < 1e-5
