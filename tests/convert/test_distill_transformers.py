"""A transformers teacher through both commands: a tiny random Llama (and Qwen3) saved with a
tokenizer trained on the corpus, `layerzoo convert` into a Gated DeltaNet : attention 1:1 hybrid,
`layerzoo distill` for two steps a stage; the reliance measure has a row for each converted layer,
and AutoModelForCausalLM loads the student and generates on its state; `layerzoo eval` scores it
beside the teacher folder."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
import yaml

transformers = pytest.importorskip("transformers")

from layerzoo.cli import main
from tests.helpers.conversion import write_text, write_tokenizer
from tests.helpers.hf_teachers import TeacherCase, save_teacher
from tests.training.distill.conftest import settings

PATTERN = "gated_deltanet,attention"  # over four layers: 0 and 2 become Gated DeltaNet


@pytest.mark.parametrize("case", [TeacherCase("llama", n_layers=4), TeacherCase("qwen3", n_layers=4, head_dim=16)],
                         ids=["llama", "qwen3"])
def test_a_transformers_teacher_converts_distils_and_generates(case, tmp_path):
    import layerzoo.hf  # noqa: F401 (registers the Auto classes)

    corpus = write_text(tmp_path / "corpus")
    teacher = write_tokenizer(corpus, save_teacher(case, tmp_path / "teacher", tokenizer_size=None))
    converted, run, config = tmp_path / "converted", tmp_path / "run", tmp_path / "distill.yaml"
    assert main(["convert", str(teacher), "--pattern", PATTERN, "--out", str(converted)]) == 0
    stage = {"steps": 2, "batch_size": 2, "seq_len": 32}
    config.write_text(yaml.safe_dump({"distill": settings(SimpleNamespace(corpus=corpus), align=stage, end_to_end=stage)}))
    assert main(["distill", str(converted), "--out", str(run), "--config", str(config), "--no-progress"]) == 0

    reliance = json.loads((run / "reliance.json").read_text())
    assert [(row["layer"], row["mixer"]) for row in reliance["layers"]] == [(0, "gated_deltanet"), (2, "gated_deltanet")]
    assert all(math.isfinite(row[key]) for row in reliance["layers"] for key in ("loss", "kl"))
    assert json.loads((run / "distill-report.json").read_text())["converted_layers"] == [0, 2]

    model = transformers.AutoModelForCausalLM.from_pretrained(run / "model").eval()
    ids = torch.tensor([transformers.AutoTokenizer.from_pretrained(run / "model")("def class return self").input_ids])
    with torch.no_grad():
        generated = model.generate(ids, max_new_tokens=4, do_sample=False, return_dict_in_generate=True)
        greedy = ids  # the same tokens recomputed from the whole sequence at each step, without a state
        for _ in range(4):
            greedy = torch.cat((greedy, model(greedy).logits[:, -1:].argmax(-1)), dim=1)
    tokens = generated.sequences
    assert tokens.shape[1] == ids.shape[1] + 4 and torch.equal(tokens, greedy)
    cache = generated.cache if hasattr(generated, "cache") else generated.past_key_values
    assert isinstance(cache, layerzoo.hf.LayerzooCache)

    # beside its teacher, the transformers folder read as `layerzoo convert` reads it
    assert main(["eval", str(run), "--lengths", "32", "64"]) == 0
    for name, kind in (("perplexity-teacher-windowspec", "teacher"), ("perplexity-windowspec", "student")):
        report = json.loads((run / f"{name}.json").read_text())
        assert report["kind"] == kind and all(math.isfinite(row["loss"]) for row in report["lengths"])
