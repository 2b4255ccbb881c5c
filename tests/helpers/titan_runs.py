"""torchtitan runs for tests/torchtitan: a small text spec, torchrun with the CPU patches, the losses it logs."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings
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


ARMT = """\
armt: {segment_size: 16, num_mem_tokens: 4, d_mem: 16, memory_pattern: [false, true]}
"""


def write_spec(folder: Path, extra: str = "", name: str = "spec.yaml") -> Path:
    """The swax-gdn-tiny model trained on six small text documents with a BPE of 300 tokens, and the
    `extra` YAML sections (ARMT: that model in two segments of 16 tokens, memory in layers 1 and 3)."""
    corpus = folder / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for seed in range(6):
        (corpus / f"d{seed}.txt").write_text(document(seed, 150), encoding="utf-8")
    path = folder / name
    path.write_text(SPEC.replace("CORPUS", str(corpus)) + extra)
    return path


def torchrun(dump: Path, processes: int = 2) -> list[str]:
    """torchrun of `processes` processes: rank 0's output on the console, every rank's in files under dump/ranks."""
    return [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(processes), "--local-ranks-filter",
            "0", "--log-dir", str(dump / "ranks"), "--tee", "3"]


def titan_train(spec: Path, dump: Path, *flags: str, overrides: tuple[str, ...] = (), processes: int = 2) -> str:
    """torchrun of `processes` gloo processes training `spec` under torchtitan; returns rank 0's log."""
    command = [*torchrun(dump, processes), "-m", "torchtitan.train", "--module", "layerzoo.hf.torchtitan",
               "--config", "layerzoo_spec", "--dump_folder", str(dump), "--metrics.log_freq", "1", *flags]
    return run(command, {"LAYERZOO_SPEC": str(spec), "LAYERZOO_SET": "\n".join(overrides)}, dump / "ranks",
               processes)


def docs_train(spec: Path, dump: Path, overrides: tuple[str, ...], section: str = "## Training a spec",
               replaced: tuple[tuple[str, str], ...] = ()) -> str:
    """The command of docs/training-at-scale.md's `section`, run on `spec` with `overrides`, 2
    processes (rank 0's log), `dump` for its folder and the `replaced` (written, here) pairs;
    returns rank 0's log."""
    (command,) = [code for heading, language, code, _ in fenced_blocks(DOCS / "training-at-scale.md")
                  if heading == section and language == "bash"]
    launcher = shlex.join(torchrun(dump))
    environment = f"LAYERZOO_SPEC={shlex.quote(str(spec))} LAYERZOO_SET={shlex.quote(chr(10).join(overrides))}"
    for written, here in (("LAYERZOO_SPEC=swax-gdn-tiny", environment), ("torchrun --nproc-per-node 8", launcher),
                          ("runs/titan", str(dump)), *replaced):
        assert written in command, f"the page's command no longer says {written!r}"
        command = command.replace(written, here)
    return run(["bash", "-c", command.strip() + " --metrics.log_freq 1"], {}, dump / "ranks")


def run(command: list[str], env: dict[str, str], ranks: Path, processes: int = 2) -> str:
    """`command` with the CPU patches and this checkout on PYTHONPATH; its output, asserting it
    succeeded, or that it failed only in gloo's teardown after every rank had finished training."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(PATCHES), str(ROOT)]), "OMP_NUM_THREADS": "1", **env}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    log = done.stdout + done.stderr
    if done.returncode != 0:
        rank_logs = {folder.name: "".join((folder / name).read_text(errors="replace") for name in ("stdout.log", "stderr.log"))
                     for folder in sorted(path.parent for path in ranks.rglob("stderr.log"))}
        tails = "\n".join(f"--- rank {rank}'s output:\n{text[-1500:]}" for rank, text in rank_logs.items())
        finished = len(rank_logs) == processes and all("Training completed" in text for text in rank_logs.values())
        # A rank aborted by a signal after its last step is torch's CPU process-group teardown
        # (rank 1 tears down while rank 0 sleeps), not the run under test: warn, keep its losses.
        assert finished, f"{log[-2500:]}\n{tails}"
        warnings.warn(f"torchrun exited {done.returncode} after every rank finished training:\n{tails}", stacklevel=2)
    return log


def logged_losses(log: str) -> dict[int, float]:
    """{step: loss} from torchtitan's metric lines (colour codes removed)."""
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)
    return {int(step): float(loss) for step, loss in re.findall(r"step:\s+(\d+)\s+loss:\s+([0-9.]+)", plain)}
