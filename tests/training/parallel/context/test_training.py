"""`training.context: K` in `layerzoo train`: two gloo processes sharing each packed example, a
piece each, sharded with FSDP2, give one process's losses, and so does full attention over two
ranks, balanced or in contiguous pieces; a checkpoint resumes across a change of context size either way; ARMT, each rank holding whole
segments, trains under DDP and under FSDP2 as one process;
bad input is refused in one line."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from layerzoo.training import train
from layerzoo.training.parallel.context import ContextError
from tests.helpers.run_checks import metric_records
from tests.helpers.tiny import TINY

# The tiny spec with a Gated DeltaNet layer for its attention one, packed examples, 4 steps with
# a checkpoint at step 2 (where the resumes start).
SPEC = (TINY.replace("pattern: [swa, attention]", "pattern: [swa, gated_deltanet]")
        .replace("attention: {n_heads: 2}", "gated_deltanet: {n_heads: 2, chunk_size: 4}")
        .replace("task: {name: mqar, num_pairs: 4}", "task: {name: mqar, num_pairs: 4, pack: true}")
        .replace("steps: 6", "steps: 4"))
TRAIN = ["-m", "layerzoo.cli", "train", "spec.yaml", "--no-progress", "--set", "training.eval.lengths=[32]",
         "--set", "training.checkpoint_every=2"]
TWO_RANKS = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
CONTEXT_TWO = ["--set", "training.context=2", "--set", "training.parallel=fsdp"]


def losses(run_dir) -> list[float]:
    return [r[key] for r in metric_records(run_dir) if "loss" in r for key in ("loss", "grad_norm")]


def run(command, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The folder holding "one" (one process) and "two" (context 2 on two ranks under FSDP2)."""
    out = tmp_path_factory.mktemp("context")
    (out / "spec.yaml").write_text(SPEC)
    run([sys.executable, *TRAIN, "--out", "one"], out)
    run([*TWO_RANKS, *TRAIN, *CONTEXT_TWO, "--out", "two"], out)
    return out


def test_two_ranks_sharing_each_example_under_fsdp_match_one_process(runs):
    one, two = losses(runs / "one"), losses(runs / "two")
    assert len(one) == len(two) == 8
    assert one == pytest.approx(two, rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("first, then", [("two", [sys.executable]), ("one", [*TWO_RANKS])],
                         ids=["context-2-then-1", "context-1-then-2"])
def test_a_checkpoint_resumes_across_a_change_of_context_size(runs, tmp_path, first, then):
    """Cut after step 2's checkpoint, resumed with the other context size: one process's losses."""
    shutil.copytree(runs, tmp_path / "runs")
    resumed = tmp_path / "runs" / first
    shutil.rmtree(resumed / "checkpoints" / "step-00000004")  # as if killed before step 4's was written
    kept = [{**record, "before_the_cut": True} for record in metric_records(resumed)]
    (resumed / "metrics.jsonl").write_text("".join(json.dumps(record) + "\n" for record in kept))
    context = CONTEXT_TWO if first == "one" else []
    run([*then, *TRAIN, *context, "--out", first, "--resume"], tmp_path / "runs")
    assert losses(resumed) == pytest.approx(losses(runs / "one"), rel=1e-5, abs=1e-6)
    # resumed, not started over: steps 1-2 are the first run's records, steps 3-4 the resumed run's
    assert {r["step"]: "before_the_cut" in r for r in metric_records(resumed) if "loss" in r} == {
        1: True, 2: True, 3: False, 4: False}


@pytest.mark.parametrize("balance", ["true", "false"], ids=["balanced", "contiguous"])
def test_full_attention_over_two_ranks_trains_as_one_process(tmp_path, balance):
    """The tiny spec as it is (SWA and full attention, rows of one sequence each) under DDP, its
    attention balanced over the ranks (the default) or not."""
    (tmp_path / "spec.yaml").write_text(TINY.replace("steps: 6", "steps: 2"))
    run([sys.executable, *TRAIN, "--out", "one"], tmp_path)
    run([*TWO_RANKS, *TRAIN, "--set", "training.context=2", "--set", f"training.balance_attention={balance}",
         "--out", "two"], tmp_path)
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert len(one) == len(two) == 4
    assert one == pytest.approx(two, rel=1e-5, abs=1e-6)


def test_a_context_larger_than_the_world_is_refused_in_one_line(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    with pytest.raises(ContextError, match="dividing the world size 1") as error:
        train(tmp_path / "spec.yaml", ["training.context=2"], run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run" / "spec.yaml").exists()  # refused before the run folder is written


# ARMT around the shared tiny stack in 16-token segments: a 32-token example is one segment per rank
ARMT = TINY.replace("steps: 6", "steps: 3") + "armt: {segment_size: 16, num_mem_tokens: 2, d_mem: 16, memory_layers: [0, 1]}\n"


@pytest.mark.parametrize("parallel", ["ddp", "fsdp"])
def test_armt_with_two_ranks_sharing_each_example_matches_one_process(tmp_path, parallel):
    """Rank 0 holds the first segment (it reads no memory: DDP finds the weights it leaves
    unused, and under FSDP2 they get zero gradients, so both ranks reduce-scatter every weight),
    rank 1 the second, from the memory rank 0 handed on."""
    (tmp_path / "spec.yaml").write_text(ARMT)
    run([sys.executable, *TRAIN, "--out", "one"], tmp_path)
    run([*TWO_RANKS, *TRAIN, "--set", "training.context=2", "--set", f"training.parallel={parallel}", "--out", "two"],
        tmp_path)
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert len(one) == len(two) == 6
    assert one == pytest.approx(two, rel=1e-5, abs=1e-6)
