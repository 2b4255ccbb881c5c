"""torchtitan runs for tests/torchtitan: a small text spec, torchrun with the CPU patches, the losses it logs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.helpers.text_corpus import document
from tests.test_docs import DOCS, fenced_blocks

PATCHES = Path(__file__).parent.parent / "torchtitan" / "cpu_patches"
ROOT = Path(__file__).parent.parent.parent

SPEC = """\
name: swax-gdn-text
model:
  d_model: 64
  n_layers: 4
  vocab_size: 300
  mixers:
    swa: {n_heads: 4, n_kv_heads: 2, window: 16}
    gated_deltanet: {n_heads: 2, head_dim: 16, chunk_size: 16}
  pattern: [swa, gated_deltanet]
  ffn: {mult: 2.667, multiple_of: 64}
training:
  task: {name: text, files: ["CORPUS/*.txt"], tokenizer: "bpe:300", holdout: 0.2}
  seq_len: 32
  steps: 4
  batch_size: 4
  optimizer: {lr: 3.0e-3, warmup_steps: 2}
  window: {schedule: fixed, long: 16}
  checkpoint_every: 2
  log_every: 1
  eval: {every: 100, samples: 4, lengths: [32]}
"""


def write_spec(folder: Path) -> Path:
    """The swax-gdn-tiny model trained on six small text documents with a BPE of 300 tokens."""
    corpus = folder / "corpus"
    corpus.mkdir(parents=True)
    for seed in range(6):
        (corpus / f"d{seed}.txt").write_text(document(seed, 150), encoding="utf-8")
    path = folder / "spec.yaml"
    path.write_text(SPEC.replace("CORPUS", str(corpus)))
    return path


def titan_train(spec: Path, dump: Path, *flags: str, overrides: tuple[str, ...] = ()) -> str:
    """torchrun of 2 gloo processes training `spec` under torchtitan; returns rank 0's log."""
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--local-ranks-filter", "0",
               "-m", "torchtitan.train", "--module", "layerzoo.hf.torchtitan", "--config", "layerzoo_spec",
               "--dump_folder", str(dump), "--metrics.log_freq", "1", *flags]
    return run(command, {"LAYERZOO_SPEC": str(spec), "LAYERZOO_SET": "\n".join(overrides)})


def docs_train(spec: Path, dump: Path, overrides: tuple[str, ...], section: str = "## Training a spec",
               replaced: tuple[tuple[str, str], ...] = ()) -> str:
    """The command of docs/training-at-scale.md's `section`, run on `spec` with `overrides`, 2
    processes (rank 0's log), `dump` for its folder and the `replaced` (written, here) pairs;
    returns rank 0's log."""
    (command,) = [code for heading, language, code, _ in fenced_blocks(DOCS / "training-at-scale.md")
                  if heading == section and language == "bash"]
    torchrun = f"{shlex.quote(sys.executable)} -m torch.distributed.run --nproc-per-node 2 --local-ranks-filter 0"
    environment = f"LAYERZOO_SPEC={shlex.quote(str(spec))} LAYERZOO_SET={shlex.quote(chr(10).join(overrides))}"
    for written, here in (("LAYERZOO_SPEC=swax-gdn-tiny", environment), ("torchrun --nproc-per-node 8", torchrun),
                          ("runs/titan", str(dump)), *replaced):
        assert written in command, f"the page's command no longer says {written!r}"
        command = command.replace(written, here)
    return run(["bash", "-c", command.strip() + " --metrics.log_freq 1"], {})


def run(command: list[str], env: dict[str, str]) -> str:
    """`command` with the CPU patches and this checkout on PYTHONPATH; its output, asserting it succeeded."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PATCHES), str(ROOT)]), "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    log = done.stdout + done.stderr
    assert done.returncode == 0, log[-4000:]
    return log


def logged_losses(log: str) -> dict[int, float]:
    """{step: loss} from torchtitan's metric lines (colour codes removed)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    return {int(step): float(loss) for step, loss in re.findall(r"step:\s+(\d+)\s+loss:\s+([0-9.]+)", plain)}
