"""lm-evaluation-harness on an exported folder with local tasks (no downloads), through `layerzoo lm-eval`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

DOCS = [
    {"question": "the cat sat on the", "choices": ["mat", "log"], "answer": 0, "target": "mat"},
    {"question": "what color is the sky", "choices": ["blue", "green"], "answer": 0, "target": "blue"},
    {"question": "the dog ran on the", "choices": ["log", "red"], "answer": 0, "target": "log"},
]


def write_tasks(folder: Path, stop: str) -> None:
    """tiny_choice (multiple choice, acc) and tiny_gen (generate until `stop`, exact match) on DOCS."""
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(doc) + "\n" for doc in DOCS))
    common = f"dataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {data}\ntest_split: test\ndoc_to_text: '{{{{question}}}}'\n"
    (folder / "choice.yaml").write_text(f"task: tiny_choice\n{common}" + textwrap.dedent("""\
        output_type: multiple_choice
        doc_to_choice: '{{choices}}'
        doc_to_target: '{{answer}}'
        metric_list: [{metric: acc, aggregation: mean, higher_is_better: true}]
        """))
    (folder / "gen.yaml").write_text(f"task: tiny_gen\n{common}" + textwrap.dedent(f"""\
        output_type: generate_until
        doc_to_target: '{{{{target}}}}'
        generation_kwargs: {{until: ['{stop}'], max_gen_toks: 3, do_sample: false}}
        metric_list: [{{metric: exact_match, aggregation: mean, higher_is_better: true}}]
        """))


def run_tasks(model_folder: Path, folder: Path, stop: str) -> dict:
    """`layerzoo lm-eval` of the two local tasks on model_folder, offline; returns the results
    section of lm_eval's JSON (asserting it exited 0)."""
    write_tasks(folder, stop)
    out = folder / "results"
    command = [sys.executable, "-m", "layerzoo", "lm-eval", "--model", "hf", "--model_args", f"pretrained={model_folder}",
               "--tasks", "tiny_choice,tiny_gen", "--include_path", str(folder), "--device", "cpu",
               "--batch_size", "2", "--output_path", str(out)]
    offline = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    result = subprocess.run(command, capture_output=True, text=True, env=offline, cwd=folder)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(next(out.rglob("results_*.json")).read_text())["results"]
