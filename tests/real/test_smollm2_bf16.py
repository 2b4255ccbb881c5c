"""bf16 autocast on SmolLM2-135M-Instruct: `layerzoo eval --precision bf16` scores the GGUF file within
bf16's reach of fp32 (and not equal to it: autocast applied), and a conversion distils under bf16,
stage 1 aligning its new mixers and stage 2 training the whole student, with finite losses and the
precision in its report."""

import json
import math

import pytest

from layerzoo.cli import main

pytestmark = pytest.mark.real

DATA = {"files": ["stdlib:json/*.py"], "holdout": 0.2}
STAGE = {"steps": 1, "batch_size": 1, "seq_len": 64}
CONFIG = {"data": DATA, "align": STAGE, "end_to_end": STAGE, "eval": {"samples": 1, "batch_size": 1},
          "precision": "bf16"}
PATTERN = {"mixers": {"swa": {"type": "swa", "window": 16}}, "pattern": "attention; swa@-2; gated_deltanet@14,-1"}
# A perplexity's log, the mean loss per token, in bf16 against fp32: bf16 keeps 8 bits of mantissa,
# and 30 layers of rounded matmuls move a 64-token loss by well under this.
LOSS_RELATIVE = 0.02


def perplexity_loss(gguf, out, precision: str) -> tuple[str, float]:
    assert main(["eval", str(gguf), "--text", "stdlib:json/*.py", "--lengths", "64", "--samples", "1",
                 "--out", str(out), "--precision", precision, "--no-progress"]) == 0
    (path,) = out.glob("perplexity-*.json")
    report = json.loads(path.read_text())
    (row,) = report["lengths"]
    return report["precision"], row["loss"]


def test_bf16_perplexity_is_within_bf16_reach_of_fp32(smollm2_gguf, tmp_path):
    (fp32, want), (bf16, got) = (perplexity_loss(smollm2_gguf, tmp_path / p, p) for p in ("fp32", "bf16"))
    assert (fp32, bf16) == ("fp32", "bf16")
    assert got != want and abs(got - want) <= LOSS_RELATIVE * want, (got, want)


def test_a_conversion_distils_both_stages_in_bf16(smollm2_folder, tmp_path):
    from layerzoo.convert import convert
    from layerzoo.training.distill.config import distillation_spec
    from layerzoo.training.distill.run import distill

    conversion = convert(smollm2_folder, PATTERN)
    result = distill(conversion, distillation_spec(conversion.student.config, CONFIG), tmp_path / "run", progress=False)
    assert result.report["precision"] == "bf16"
    for stage in ("align", "end_to_end"):
        records = [json.loads(line) for line in (tmp_path / "run" / stage / "metrics.jsonl").read_text().splitlines()]
        losses = [record["loss"] for record in records if "loss" in record]
        assert losses and all(math.isfinite(loss) for loss in losses), (stage, records)
    assert math.isfinite(result.report["heldout"]["end_to_end"]["eval_kl"])
