"""bf16 autocast on SmolLM2-135M-Instruct: `layerzoo eval --precision bf16` scores the GGUF file within
bf16's reach of fp32 (and not equal to it: autocast applied), and a conversion distils under bf16,
stage 1 aligning its new mixers and stage 2 training the whole student, with finite losses and the
precision in its report, and `layerzoo train` trains ARMT's memory around it, its first loss within
bf16's reach of fp32's."""

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


def first_loss(folder, run_dir, precision: str) -> float:
    """The first step's loss of `layerzoo train` on ARMT around SmolLM2 (its memory trains), under `precision`."""
    overrides = [f"base.hf_checkpoint={folder}", f"training.task.tokenizer={folder}",
                 'training.task.files=["stdlib:json/*.py"]', "training.task.holdout=0.2", "armt.segment_size=32",
                 "armt.num_mem_tokens=4", "training.seq_len=64", "training.batch_size=1", "training.steps=2",
                 "training.eval.samples=1", "training.eval.lengths=[64]", "training.eval.documents=1",
                 "training.eval.batch_size=1", "training.checkpoint_every=null", "training.log_every=1",
                 f"training.precision={precision}"]
    flags = [flag for override in overrides for flag in ("--set", override)]
    assert main(["train", "armt-hf-text", *flags, "--out", str(run_dir), "--no-progress"]) == 0
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    losses = [record["loss"] for record in records if "loss" in record]
    assert len(losses) == 2 and all(math.isfinite(loss) for loss in losses), records
    return losses[0]


def test_armt_around_it_trains_in_bf16_within_bf16_reach_of_fp32(smollm2_folder, tmp_path):
    want, got = (first_loss(smollm2_folder, tmp_path / p, p) for p in ("fp32", "bf16"))
    assert got != want and abs(got - want) <= LOSS_RELATIVE * want, (got, want)
