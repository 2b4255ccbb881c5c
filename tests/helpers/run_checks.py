"""Reading a run folder the way a user's tools would: strict JSON metrics, checkpoint steps,
and the final state of a run compared bit for bit with another's."""

import json
from pathlib import Path

import torch
from safetensors.torch import load_file


def refuse_constant(name):
    raise ValueError(f"{name} is not JSON")


def metric_records(run_dir) -> list[dict]:
    """metrics.jsonl as strict JSON (a bare NaN or Infinity fails)."""
    lines = (Path(run_dir) / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line, parse_constant=refuse_constant) for line in lines]


def without_timing(records: list[dict]) -> list[dict]:
    """The records without tokens_per_s, the one value that depends on the machine's speed."""
    return [{key: value for key, value in record.items() if key != "tokens_per_s"} for record in records]


def checkpoint_steps(run_dir) -> list[int]:
    return [int(path.name.removeprefix("step-")) for path in sorted((Path(run_dir) / "checkpoints").glob("step-*"))]


def assert_same_final_state(run_a, run_b) -> None:
    """Same metrics (but speed), and the newest checkpoints hold the same tensors to the bit."""
    assert without_timing(metric_records(run_a)) == without_timing(metric_records(run_b))
    newest_a = sorted((Path(run_a) / "checkpoints").glob("step-*"))[-1]
    newest_b = sorted((Path(run_b) / "checkpoints").glob("step-*"))[-1]
    assert newest_a.name == newest_b.name
    for name in ("model.safetensors", "trainer.safetensors"):
        a, b = load_file(newest_a / name), load_file(newest_b / name)
        assert a.keys() == b.keys(), name
        for key in a:
            assert torch.equal(a[key], b[key]), (name, key)
