"""`training.context: K` in `layerzoo train`: two gloo processes sharing each packed example, a
piece each, sharded with FSDP2, give one process's losses; bad input is refused in one line."""

import json
import os
import subprocess
import sys

import pytest

from layerzoo.training import train
from layerzoo.training.parallel.context import ContextError
from tests.helpers.tiny import TINY

# The tiny spec with a Gated DeltaNet layer for its attention one, packed examples, 3 steps.
SPEC = (TINY.replace("pattern: [swa, attention]", "pattern: [swa, gated_deltanet]")
        .replace("attention: {n_heads: 2}", "gated_deltanet: {n_heads: 2, chunk_size: 4}")
        .replace("task: {name: mqar, num_pairs: 4}", "task: {name: mqar, num_pairs: 4, pack: true}")
        .replace("steps: 6", "steps: 3"))
TRAIN = ["-m", "layerzoo.cli", "train", "spec.yaml", "--no-progress", "--set", "training.eval.lengths=[32]"]


def losses(run_dir) -> list[float]:
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [r[key] for r in records if "loss" in r for key in ("loss", "grad_norm")]


def run(command, cwd):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]


def test_two_ranks_sharing_each_example_under_fsdp_match_one_process(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    run([sys.executable, *TRAIN, "--out", "one"], tmp_path)
    run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", *TRAIN,
         "--set", "training.context=2", "--set", "training.parallel=fsdp", "--out", "two"], tmp_path)
    one, two = losses(tmp_path / "one"), losses(tmp_path / "two")
    assert len(one) == len(two) == 6
    assert one == pytest.approx(two, rel=1e-5, abs=1e-6)


def test_a_context_larger_than_the_world_is_refused_in_one_line(tmp_path):
    (tmp_path / "spec.yaml").write_text(SPEC)
    with pytest.raises(ContextError, match="dividing the world size 1") as error:
        train(tmp_path / "spec.yaml", ["training.context=2"], run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(error.value)
    assert not (tmp_path / "run" / "spec.yaml").exists()  # refused before the run folder is written
