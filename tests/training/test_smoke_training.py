import json

import torch

import layerzoo
from layerzoo.tasks import make_task
from layerzoo.training.evaluation.evaluate import evaluate
from layerzoo.training.loop.trainer import train


def test_a_short_training_lowers_the_mqar_loss(tiny_spec, tmp_path):
    settings = ["training.steps=60", "training.optimizer.lr=1e-2", "training.log_every=10"]
    spec = layerzoo.load_spec(tiny_spec, settings)
    task = make_task("mqar", spec.training.task.options, spec.model.vocab_size)
    torch.manual_seed(spec.training.seed)
    before = evaluate(layerzoo.build(spec), task, 32, 64, seed=11)
    result = train(spec, run_dir=tmp_path / "run", progress=False)
    after = evaluate(result.model, task, 32, 64, seed=11)
    assert after["loss"] < before["loss"] - 0.5, (before, after)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert {"loss", "accuracy", "lr", "tokens_per_s", "window"} <= set(records[0])
    assert any("eval_accuracy" in record for record in records)
